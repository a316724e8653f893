// Stream-ordered (GPU) collectives of one communicator. By default a call that passes a CUDA
// stream is asynchronous, as NCCL's are: it returns once the operation is queued behind the
// stream's earlier work, the stream waits (zcx_stream_wait) until a progress thread has run
// it, and work queued after the call sees the result (core/gpu_async.h). With
// ZCX_GPU_ASYNC=0 the call records an event on the stream, waits for it, runs the operation
// to completion and returns. See docs/ARCHITECTURE.md, "GPU collectives", for the stream
// hold that was tried first and deadlocked on an H200.
//
// No CUDA call of zcx that can wait for the whole device (cudaMalloc, cudaMallocHost, module
// loads) runs while a stream waits for zcx: such waits would then wait on zcx itself. The
// runner owns what the device schedules need: a non-blocking CUDA stream for their copies
// and reduction kernels, device scratch, and pinned bounce buffers for transfers staged
// through host memory.
#pragma once

#include "algorithms/algorithms.h"
#include "common/status.h"
#include "schedule/executor.h"
#include "schedule/scratch_pool.h"

#include <memory>
#include <vector>

namespace zcx::coll {

class Comm;

// The CUDA device of a call's buffers (*device: -1 when no call set it yet), checked: every
// non-NULL buffer must be device memory of one device, large enough for the call.
Status device_of_call(const OpArgs& a, int nranks, int* device);
// Whether `calls` are point-to-point calls (one operation as a group), not one collective.
inline bool is_p2p(const std::vector<OpArgs>& calls) {
  return !calls.empty() && calls.front().kind == CollKind::kSendRecv;
}

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
  // Runs `calls` on `comm` as one operation after the work queued on `stream` so far:
  // queued for the progress thread (asynchronous), or to completion (ZCX_GPU_ASYNC=0, read
  // at create). calls: one collective, or the point-to-point calls of a group.
  Status run(Comm& comm, std::vector<OpArgs> calls, void* stream);
  // Waits until no asynchronous call is in flight: every host-side use of the communicator
  // (a call without a stream, a group, split, destroy) comes after this. Returns the first
  // failure of an asynchronous call, sticky.
  Status quiesce();
  // That failure without waiting, else comm's own while no call is in flight (kSuccess).
  Status async_error(const Comm& comm) const;
  // Ends an asynchronous call in flight promptly, then stops the progress thread. Before the
  // communicator is destroyed: the thread drives it.
  void stop();

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
