// Stream-ordered (GPU) collectives of one communicator. A call that passes a CUDA stream
// records an event on that stream, waits for it (the work queued before the call has then
// finished: the operation reads what that work wrote), runs the operation on device buffers
// to completion, and returns. Work queued on the stream after the call therefore sees the
// result. The call is not asynchronous to the host: see docs/ARCHITECTURE.md, "GPU
// collectives", for the stream hold that was tried first and deadlocked on an H200.
//
// While the operation runs, nothing of zcx holds the user's stream or any other, so CUDA
// calls that wait for the whole device (cudaMalloc, cudaFree, module loads) cannot wait on
// zcx itself. The runner owns what the device schedules need: a non-blocking CUDA stream
// for their copies and reduction kernels, device scratch, and pinned bounce buffers for
// transfers staged through host memory.
#pragma once

#include "algorithms/algorithms.h"
#include "common/status.h"
#include "schedule/executor.h"
#include "schedule/scratch_pool.h"

#include <memory>

namespace zcx::coll {

class Comm;

// The CUDA device of a call's buffers (*device: -1 when no call set it yet), checked: every
// non-NULL buffer must be device memory of one device, large enough for the call.
Status device_of_call(const OpArgs& a, int nranks, int* device);

class GpuRunner {
 public:
  // For `device` (kUnsupported in a build without CUDA or without a driver).
  static Status create(int device, std::unique_ptr<GpuRunner>* out);
  ~GpuRunner();
  GpuRunner(const GpuRunner&) = delete;
  GpuRunner& operator=(const GpuRunner&) = delete;

  int device() const;
  // ZCX_GPU_STAGING, read at create: transfers through pinned host memory even where
  // cuda_ipc reaches the peer.
  bool staging() const;
  // Waits for the work queued on `stream` before the call, then runs `a` on `comm`.
  Status run(Comm& comm, const OpArgs& a, void* stream);

  const DeviceIo* io() const;
  std::shared_ptr<ScratchPool> device_scratch() const;
  // avg's last step on the device: buf[i] /= nranks.
  Status finalize_avg(zcx_dtype_t dtype, void* buf, size_t count, int nranks);

  struct Impl;

 private:
  explicit GpuRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zcx::coll
