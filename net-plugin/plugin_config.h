// ZCX_ variables read only by the NCCL plugin (the others are the core's and providers').
#pragma once

#include "common/config.h"

#include <cstdint>

namespace zcx::plugin {

extern const config::StringParam net_provider;  // ZCX_NET_PROVIDER

// The connection-handshake secret: ZCX_SECRET when set (16 hex digits), else a fixed,
// documented value (docs/NCCL_PLUGIN.md: NCCL's own bootstrap authenticates the peers).
uint64_t plugin_secret();

}  // namespace zcx::plugin
