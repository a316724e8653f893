// The executor's device-memory steps (stream-ordered GPU operations): reductions as CUDA
// kernels and copies as cudaMemcpyAsync on the GPU runner's stream, and the host copies of
// staged transfers (device -> pinned bounce -> host provider -> pinned bounce -> device).
// Each step waits for its own stream before the task counts as complete: the steps are
// short, the stream is the runner's own (never the user's), and the schedule's later tasks,
// including sends of what a reduction wrote, depend on the result.
#include "schedule/executor.h"

#include "zcx/config.h"

#if ZCX_HAVE_CUDA
#include "common/dl/cuda_shim.h"
#include "reduce/cuda/reduce_cuda.h"
#endif

namespace zcx::coll {

#if ZCX_HAVE_CUDA

namespace {

Status io_of(PeerLinks* links, const DeviceIo** io) {
  *io = links->device_io();
  const CudaApi* api = cuda_shim();
  if (*io == nullptr || (*io)->stream == nullptr || api == nullptr)
    return set_error(Status::kInternal, kLogColl,
                     "a device-memory schedule ran without the communicator's GPU runner");
  return Status::kSuccess;
}

Status finish(const DeviceIo* io) {
  return cuda_check(cuda_shim()->stream_synchronize(static_cast<cudaStream_t>(io->stream)),
                    "cudaStreamSynchronize (zcx GPU runner)");
}

Status copy(const DeviceIo* io, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  auto stream = static_cast<cudaStream_t>(io->stream);
  ZCX_TRY(cuda_check(cuda_shim()->copy_async(dst, src, bytes, kind, stream), "cudaMemcpyAsync"));
  return finish(io);
}

}  // namespace

Status Executor::device_compute(const Task& t) {
  const DeviceIo* io = nullptr;
  ZCX_TRY(io_of(links_, &io));
  if (t.kind == TaskKind::kCopy) return copy(io, t.dst, t.src, t.bytes, cudaMemcpyDefault);
  const size_t n = t.bytes / zcx_dtype_size(sched_->dtype());
  ZCX_TRY(cuda::reduce_async(sched_->dtype(), sched_->op(), t.dst, t.src, t.src2, n,
                             static_cast<cudaStream_t>(io->stream)));
  return finish(io);
}

Status Executor::stage_buffer(const Task& t, Slot& s) {
  const DeviceIo* io = nullptr;
  ZCX_TRY(io_of(links_, &io));
  s.bounce = std::make_unique<ScratchBlock>(io->pinned, t.bytes);
  return Status::kSuccess;
}

Status Executor::stage_out(const Task& t, Slot& s) {
  ZCX_TRY(stage_buffer(t, s));
  return copy(links_->device_io(), s.bounce->data(), t.src, t.bytes, cudaMemcpyDeviceToHost);
}

Status Executor::stage_in(const Task& t, Slot& s) {
  return copy(links_->device_io(), t.dst, s.bounce->data(), t.bytes, cudaMemcpyHostToDevice);
}

// Before the received data feeds a kernel or a send (the task's dependents). The calling
// thread's current device is the runner's (CudaDeviceGuard, or the progress thread's own).
Status Executor::flush_gdr_writes() {
  const DeviceIo* io = nullptr;
  ZCX_TRY(io_of(links_, &io));
  if (!io->flush_gdr_writes) return Status::kSuccess;
  return cuda_check(cuda_shim()->flush_gpudirect_rdma_writes(
                        cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                        cudaFlushGPUDirectRDMAWritesToOwner),
                    "cudaDeviceFlushGPUDirectRDMAWrites");
}

// A registration must not span two allocations, even adjacent ones.
Executor::Allocation Executor::allocation_of(const void* p) const {
  CUdeviceptr base = 0;
  size_t size = 0;
  const CudaApi* api = cuda_shim();
  const auto ptr = reinterpret_cast<CUdeviceptr>(p);
  if (api == nullptr || api->cu_mem_get_address_range(&base, &size, ptr) != CUDA_SUCCESS)
    return {};
  return {static_cast<uintptr_t>(base), size};
}

#else  // a build without CUDA has no device schedules (the API refuses streams)

namespace {
Status no_cuda() {
  return set_error(Status::kUnsupported, kLogColl, "device memory: this build has no CUDA");
}
}  // namespace

Status Executor::device_compute(const Task&) { return no_cuda(); }
Status Executor::stage_buffer(const Task&, Slot&) { return no_cuda(); }
Status Executor::stage_out(const Task&, Slot&) { return no_cuda(); }
Status Executor::stage_in(const Task&, Slot&) { return no_cuda(); }
Status Executor::flush_gdr_writes() { return no_cuda(); }
Executor::Allocation Executor::allocation_of(const void*) const { return {}; }

#endif

}  // namespace zcx::coll
