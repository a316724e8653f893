// random_u64.
#include "common/random.h"

#include "common/clock.h"

#include <sys/random.h>
#include <unistd.h>

namespace zcx {

uint64_t random_u64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v))
    v = (static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(now_ns());
  return v;
}

}  // namespace zcx
