// Routes zcx's logger into NCCL's (the ncclDebugLogger_t handed to init), so zcx lines
// appear in NCCL_DEBUG output with NCCL's prefix and filtering.
#pragma once

#include "nccl/net_abi.h"

namespace zcx::plugin {

// Idempotent; a NULL logger keeps zcx's own stderr logging.
void log_bridge_attach(ncclDebugLogger_t logger);

}  // namespace zcx::plugin
