#include "plugin_config.h"

#include "common/config_vars.h"
#include "common/log.h"

#include <cstdlib>
#include <string>

namespace zcx::plugin {

namespace {
// "zcx-nccl" in ASCII. Public on purpose: see docs/NCCL_PLUGIN.md, "Peer identity".
constexpr uint64_t kWellKnownSecret = 0x7a63782d6e63636cull;
}  // namespace

uint64_t plugin_secret() {
  std::string text = params::secret.get();
  if (text.empty()) return kWellKnownSecret;
  char* end = nullptr;
  unsigned long long v = strtoull(text.c_str(), &end, 16);
  if (end == text.c_str() || *end != '\0') {
    // The value is not echoed: secrets never reach the log.
    ZCX_WARN(kLogPlugin, "ZCX_SECRET is not hexadecimal; using the well-known plugin "
             "secret instead (set the same 16 hex digits on every node)");
    return kWellKnownSecret;
  }
  return v;
}

}  // namespace zcx::plugin
