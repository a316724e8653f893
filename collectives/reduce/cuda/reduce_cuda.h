// GPU reductions: the device counterparts of collectives/reduce/reduce.h, bit-identical to
// the CPU scalar reference (tests/gpu/reduce_cuda_test.cc compares them). Kernels come from
// an embedded fatbin loaded through the CUDA shim into the calling thread's current context,
// once per context. Built only with ZCX_HAVE_CUDA.
#pragma once

#include "common/status.h"

#include <zcx/coll.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zcx::coll::cuda {

// Enqueues out[i] = a[i] (op) b[i], i < n, on `stream` (the current device's). avg reduces
// as sum, like the CPU kernels. Buffers must be device memory aligned to the element size;
// out may alias a or b exactly. n == 0 enqueues nothing.
Status reduce_async(zcx_dtype_t dtype, zcx_redop_t op, void* out, const void* a,
                    const void* b, size_t n, cudaStream_t stream);
// Enqueues buf[i] /= nranks (the last step of avg; integers truncate toward zero).
Status finalize_avg_async(zcx_dtype_t dtype, void* buf, size_t n, int nranks,
                          cudaStream_t stream);

// Loads zcx's kernels into the current context now (a module load can wait for the whole
// device, so asynchronous calls load before they hold a stream).
Status load_kernels();
// Enqueues zcx_stream_wait (stream_wait_device.cuh): `stream` waits until the host word
// *flag reaches `ticket`, or bound_ns after the kernel starts, when it writes the ticket to
// *timed_out. flag and timed_out: pinned host memory (cudaMallocHost).
Status stream_wait_async(const uint32_t* flag, uint32_t ticket, uint64_t bound_ns,
                         uint32_t* timed_out, cudaStream_t stream);

}  // namespace zcx::coll::cuda
