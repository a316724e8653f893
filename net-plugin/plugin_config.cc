#include "plugin_config.h"

#include "common/bootstrap/bootstrap.h"
#include "common/config_vars.h"
#include "common/log.h"

#include <string>

namespace zcx::plugin {

namespace {
// "zcx-nccl" in ASCII. Public on purpose: see docs/NCCL_PLUGIN.md, "Peer identity".
constexpr uint64_t kWellKnownSecret = 0x7a63782d6e63636cull;
}  // namespace

uint64_t plugin_secret() {
  std::string text = params::secret.get();
  if (text.empty()) return kWellKnownSecret;
  uint64_t secret = 0;
  // Same grammar as the bootstrap's ZCX_SECRET; the value is never echoed into the log.
  if (parse_secret(text, &secret) != Status::kSuccess) {
    ZCX_WARN(kLogPlugin, "using the well-known plugin secret instead of the invalid "
             "ZCX_SECRET (set the same 16 hex digits on every node)");
    return kWellKnownSecret;
  }
  return secret;
}

}  // namespace zcx::plugin
