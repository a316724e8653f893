// Configuration of the NCCL plugin.
#pragma once

#include "common/config_vars.h"

#include <cstdint>

namespace zcx::plugin {

// ZCX_NET_PROVIDER lives in the core registry so every zcx program knows the name (a user
// exporting it job-wide gets no unknown-variable warning from zcx-run or zcx-perf).
inline const config::StringParam& net_provider = params::net_provider;

// The connection-handshake secret: ZCX_SECRET when set (16 hex digits), else a fixed,
// documented value (docs/NCCL_PLUGIN.md: NCCL's own bootstrap authenticates the peers).
uint64_t plugin_secret();

}  // namespace zcx::plugin
