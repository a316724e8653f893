// Stand-in when this tree has no bootstrap implementation yet: process ranks are unavailable
// (thread ranks still work).
#include "transport/exchange.h"

namespace zcx::test {

std::unique_ptr<Exchange> bootstrap_exchange(std::string* why) {
  *why = "this build has no bootstrap implementation (transport/common/bootstrap/*.cc)";
  return nullptr;
}

}  // namespace zcx::test
