// Stream-ordered (GPU) collectives of one communicator, as NCCL orders them: a call that
// passes a CUDA stream returns at once; the operation starts once the work queued before it
// on that stream has finished, and work queued after it waits for its result.
//
// How: the call is queued here, and a host function (cudaLaunchHostFunc) is enqueued on the
// user's stream. When the stream reaches it, the host function marks the call ready and
// holds the stream until the queue's progress thread has run the collective (device
// buffers, device scratch, reductions as CUDA kernels on the queue's own stream, transfers
// over cuda_ipc or staged through pinned host memory). The hold is bounded: should the
// operation make no progress for ZCX_TIMEOUT + 5 s (the executor fails it after ZCX_TIMEOUT
// already), the host function lets the stream go and the communicator carries the error.
//
// Threads: the progress thread is the only one that touches the communicator while calls
// are queued; host calls on the same communicator first wait for the queue to empty
// (quiesce). Operations run in the order they were enqueued, one at a time.
#pragma once

#include "algorithms/algorithms.h"
#include "common/status.h"
#include "schedule/executor.h"
#include "schedule/scratch_pool.h"

#include <cstdint>
#include <memory>

namespace zcx::coll {

class Comm;

// The CUDA device of a call's buffers (-1 before any call set it), checked: every non-NULL
// buffer must be device memory of one device, large enough for the call.
Status device_of_call(const OpArgs& a, int nranks, int* device);

class GpuQueue {
 public:
  // Starts the progress thread for `device` (kUnsupported in a build without CUDA).
  static Status create(Comm* comm, int device, std::unique_ptr<GpuQueue>* out);
  // Stops the thread. Calls not yet run fail with kAborted and release their streams.
  ~GpuQueue();
  GpuQueue(const GpuQueue&) = delete;
  GpuQueue& operator=(const GpuQueue&) = delete;

  int device() const;
  // ZCX_GPU_STAGING, read at create: transfers through pinned host memory even where
  // cuda_ipc reaches the peer.
  bool staging() const;
  Status enqueue(const OpArgs& a, void* stream);
  // Waits until every queued call has run (bounded: kTimeout after ZCX_TIMEOUT with nothing
  // run, e.g. a call whose stream never reaches it).
  Status quiesce(int64_t timeout_ms);
  // Stops at once: the running operation fails with kAborted, queued ones too.
  void abort();
  // The first failure of a queued operation (zcx_comm_get_async_error).
  Status error() const;
  bool idle() const;  // nothing queued: the communicator is the caller's again

  const DeviceIo* io() const;
  std::shared_ptr<ScratchPool> device_scratch() const;
  // avg's last step on the device: buf[i] /= nranks.
  Status finalize_avg(zcx_dtype_t dtype, void* buf, size_t count, int nranks);

  struct Impl;

 private:
  explicit GpuQueue(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zcx::coll
