// Asynchronous stream-ordered calls (ZCX_GPU_ASYNC=1, the default): the call returns once
// the operation is queued behind the user's stream, as NCCL's do, and a progress thread of
// the communicator runs it.
//
// At the call, on the caller's thread: wait until the previous call's operation is over (one
// operation in flight per communicator: the thread then owns the communicator alone), plan
// the operation (device scratch is taken here), take the pinned bounce buffers its staged
// transfers will use, record an event on the user's stream, and launch zcx_stream_wait on it
// with a new ticket. On the progress thread: wait for the event (the input is ready), queue
// and drive the operation, then post the ticket, which releases the user's stream.
//
// Why allocation happens on the caller's thread: cudaMalloc, cudaMallocHost and module loads
// can wait for the whole device, and the device then includes the user's stream, which
// waits for the progress thread. Such a wait on the progress thread is a deadlock (the
// stream-hold design of stop 19 met exactly that on an H200). On the caller's thread, with
// no call of this communicator in flight, the wait ends.
//
// Bounds: the operation is bounded as every operation is (ZCX_TIMEOUT without progress); the
// stream wait gives up after ZCX_GPU_STREAM_TIMEOUT (default ZCX_TIMEOUT + 30 s) in case the
// thread itself cannot post, and says so at the next call. A failure is sticky: every later
// call on the communicator returns it.
#pragma once

#include "algorithms/algorithms.h"
#include "common/status.h"
#include "schedule/scratch_pool.h"

#include <atomic>
#include <memory>
#include <vector>

namespace zcx::coll {

class Comm;

class GpuAsync {
 public:
  // For `device` (the caller made it current). input: a CUDA event of the runner's, recorded
  // on the user's stream at each call; pinned: the runner's bounce-buffer pool. Both outlive
  // this object.
  static Status create(int device, void* input, std::shared_ptr<ScratchPool> pinned,
                       std::unique_ptr<GpuAsync>* out);
  ~GpuAsync();  // ends a call in flight promptly (it fails with kAborted), stops the thread
  GpuAsync(const GpuAsync&) = delete;
  GpuAsync& operator=(const GpuAsync&) = delete;

  // Queues `calls` (device set; one collective, or a group's point-to-point calls) on
  // `comm` as one operation behind the work queued on `user` so far.
  Status submit(Comm& comm, const std::vector<OpArgs>& calls, void* user);
  // Waits until no call is in flight; the first failure of any call, sticky.
  Status quiesce();
  // The first failure so far without waiting; while none and no call is in flight,
  // comm.async_error() (the thread may be writing it otherwise).
  Status error(const Comm& comm) const;

  struct Impl;

 private:
  explicit GpuAsync(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ZCX_GPU_ASYNC (GpuRunner reads it at create).
bool gpu_async_enabled();
// Polls a CUDA event recorded on the user's stream until that work is done (a CUDA build
// only): no bound, as cudaStreamSynchronize has none, but a warning after ZCX_TIMEOUT; ends
// with kAborted once *aborting (optional) is set.
Status wait_stream_input(void* event, const std::atomic<bool>* aborting);

}  // namespace zcx::coll
