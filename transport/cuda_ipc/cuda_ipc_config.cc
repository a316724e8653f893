// ZCX_CUDA_IPC_* variables.
#include "common/config.h"
#include "cuda_ipc/cuda_ipc.h"

namespace zcx::cuda_ipc {
namespace {

const config::BoolParam cache{"ZCX_CUDA_IPC_CACHE", true,
    "Keep peer GPU allocations imported by the cuda_ipc provider mapped between transfers "
    "(opening a CUDA IPC handle costs tens of microseconds). A kept mapping can hold the "
    "allocation's memory after the peer frees it (a cuMem allocation's always does) until "
    "the peer posts a receive at that range again or the connection closes. Off: each "
    "transfer maps and unmaps the receive buffer's allocation."};

}  // namespace

bool cfg_cache_enabled() { return cache.get(); }

}  // namespace zcx::cuda_ipc
