#include "plugin_config.h"

#include "common/config_vars.h"
#include "common/log.h"

#include <cstdlib>
#include <string>

namespace zcx::plugin {

const config::StringParam net_provider{"ZCX_NET_PROVIDER", "auto",
    "Provider the NCCL plugin uses: auto (ib when it finds an active device, else tcp), or a "
    "provider name such as ib or tcp. A named provider without devices makes the plugin "
    "fail its init, so NCCL falls back to its internal nets (or fails when NCCL_NET=zcx)."};

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
    ZCX_WARN(kLogPlugin, "ZCX_SECRET='%s' is not hexadecimal; using the well-known plugin "
             "secret instead (set the same 16 hex digits on every node)", text.c_str());
    return kWellKnownSecret;
  }
  return v;
}

}  // namespace zcx::plugin
