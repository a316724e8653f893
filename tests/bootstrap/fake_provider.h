// An in-process fake provider for context and API tests: connections are queues shared by
// threads of one process. Variants: "fake" (plain), "fakelocal" (LOCAL_ONLY + NEEDS_REG),
// "nodev" (no device), "fakegdr" (NEEDS_REG, its device takes GPU memory and asks for a flush
// after receives into it: GPUDirect RDMA as the context sees it), "fakegdr-noflush" (GPU
// memory, no iflush). It exercises the context's logic: connect returning NULL for a while,
// isend answering "retry later" (NULL request), registration, peer_info, truncation.
#pragma once

#include "base/provider.h"

#include <atomic>

namespace zcx::test {

const zcx_provider_ops_t* fake_provider();        // id 200
const zcx_provider_ops_t* fake_local_provider();  // id 201: LOCAL_ONLY | NEEDS_REG
const zcx_provider_ops_t* fake_nodev_provider();  // id 202: 0 devices
// id 203: NEEDS_REG, mem_kinds HOST|CUDA, needs_flush and iflush. Its transfers copy on the
// CPU, so "GPU memory" must be host memory: the simulated CUDA runtime's, copied with that
// runtime's fake_cuda_dma_copy (its device memory is closed to other host code).
const zcx_provider_ops_t* fake_gdr_provider();
// id 204: the same without iflush (needs_flush 0): GPU memory with no flush of its own.
const zcx_provider_ops_t* fake_gdr_noflush_provider();

struct FakeStats {
  std::atomic<int> registrations{0};
  std::atomic<int> cuda_registrations{0};  // of those, kind ZCX_MEM_CUDA (fakegdr)
  std::atomic<int> flushes{0};             // iflush calls (fakegdr)
  std::atomic<int> deregistrations{0};
  std::atomic<int> send_retries{0};      // isend calls answered with a NULL request
  std::atomic<int> connect_pending{0};   // connect calls answered with a NULL comm
  std::atomic<int> open_comms{0};        // send + recv + listen comms not yet closed
  std::atomic<int> open_ctxs{0};
};
FakeStats& fake_stats();

}  // namespace zcx::test
