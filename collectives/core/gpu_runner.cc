// The GPU runner of a communicator (gpu_runner.h): the wait for the user's stream, device
// scratch and pinned bounce memory.
#include "core/gpu_runner.h"

#include "common/config.h"
#include "common/log.h"
#include "core/comm.h"
#include "core/gpu_async.h"
#include "zcx/config.h"

#if ZCX_HAVE_CUDA
#include "common/dl/cuda_shim.h"
#include "reduce/cuda/reduce_cuda.h"
#endif

#include <new>

namespace zcx::coll {
namespace {

const config::BoolParam gpu_staging{
    "ZCX_GPU_STAGING", false,
    "Stream-ordered (GPU) collectives move data through pinned host memory over the host "
    "providers even between ranks of one host that cuda_ipc reaches."};

}  // namespace

#if ZCX_HAVE_CUDA

namespace {

ScratchMemory device_memory(int device) {
  return {[device](size_t n) {
            CudaDeviceGuard guard(device);
            void* p = nullptr;
            if (cuda_shim()->mem_alloc(&p, n) != cudaSuccess) throw std::bad_alloc();
            return static_cast<uint8_t*>(p);
          },
          [device](uint8_t* p) {
            CudaDeviceGuard guard(device);
            (void)cuda_shim()->mem_free(p);
          },
          true};
}

ScratchMemory pinned_memory() {
  return {[](size_t n) {
            void* p = nullptr;
            if (cuda_shim()->host_alloc(&p, n) != cudaSuccess) throw std::bad_alloc();
            return static_cast<uint8_t*>(p);
          },
          [](uint8_t* p) { (void)cuda_shim()->host_free(p); },
          true};
}

// Whether the device may see a NIC's writes (GPUDirect RDMA) after the receive completed on
// the host, and can flush them from the host (cudaDeviceFlushGPUDirectRDMAWrites).
bool needs_gdr_flush(int device) {
  int ordering = 0, options = 0;
  const CudaApi* api = cuda_shim();
  if (api->device_get_attribute(&ordering, cudaDevAttrGPUDirectRDMAWritesOrdering, device) ||
      api->device_get_attribute(&options, cudaDevAttrGPUDirectRDMAFlushWritesOptions, device))
    return false;  // an older driver: treat the writes as ordered, as before
  return ordering < cudaGPUDirectRDMAWritesOrderingOwner &&
         (options & cudaFlushGPUDirectRDMAWritesOptionHost) != 0;
}

// Bytes of the send and receive buffers a call reads and writes (0: not checked, the V forms).
void call_extents(const OpArgs& a, int nranks, size_t* send, size_t* recv) {
  const size_t block = a.count * a.esize(), all = block * static_cast<size_t>(nranks);
  *send = *recv = 0;
  switch (a.kind) {
    case CollKind::kAllgather: *send = block, *recv = all; break;
    case CollKind::kReducescatter: *send = all, *recv = block; break;
    case CollKind::kAlltoall: *send = *recv = all; break;
    case CollKind::kAllreduce:
    case CollKind::kBroadcast:
    case CollKind::kReduce:
    case CollKind::kSendRecv: *send = *recv = block; break;
    default: break;
  }
}

// One buffer: device (or managed) memory, on one device, `bytes` inside its allocation.
Status check_buffer(const OpArgs& a, const char* which, const void* p, size_t bytes, int* device) {
  const CudaApi* api = cuda_shim();
  cudaPointerAttributes attr{};
  const char* kind = coll_kind_name(a.kind);
  if (api->pointer_get_attributes(&attr, p) != cudaSuccess ||
      (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged))
    return set_error(Status::kInvalidArg, kLogColl,
                     "%s: %s %p is not device memory (a call with a CUDA stream takes buffers "
                     "from cudaMalloc or cuMemCreate)", kind, which, p);
  if (*device >= 0 && attr.device != *device)
    return set_error(Status::kInvalidArg, kLogColl,
                     "%s: %s is on device %d, the communicator's stream-ordered calls use "
                     "device %d", kind, which, attr.device, *device);
  *device = attr.device;
  // cuMem allocations mapped back to back (expandable segments) make one buffer; a range
  // that leaves its allocation for anything else is refused.
  CUdeviceptr base = 0;
  size_t size = 0;
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  if (bytes != 0 && api->cu_mem_get_address_range(&base, &size, at) == CUDA_SUCCESS &&
      at + bytes > base + size && cuda_allocations_spanned(p, bytes) == 0)
    return set_error(Status::kInvalidArg, kLogColl,
                     "%s: %s needs %zu bytes from %p, past the end of its allocation (%zu bytes "
                     "from %p) into memory that does not continue it", kind, which, bytes, p,
                     size, reinterpret_cast<void*>(base));
  return Status::kSuccess;
}

}  // namespace

Status device_of_call(const OpArgs& a, int nranks, int* device) {
  std::string why;
  if (cuda_shim_load(&why) == nullptr)
    return set_error(Status::kUnsupported, kLogColl, "a call with a CUDA stream: %s", why.c_str());
  size_t send = 0, recv = 0;
  call_extents(a, nranks, &send, &recv);
  if (a.sendbuf && a.count) ZCX_TRY(check_buffer(a, "sendbuf", a.sendbuf, send, device));
  if (a.recvbuf && a.count) ZCX_TRY(check_buffer(a, "recvbuf", a.recvbuf, recv, device));
  if (*device < 0) ZCX_CUDACHECK(cuda_shim()->get_device(device));  // no buffer: the current one
  return Status::kSuccess;
}

struct GpuRunner::Impl {
  int device = -1;
  bool staging = false;
  cudaStream_t stream = nullptr;  // the schedules' copies and kernels
  cudaEvent_t queued = nullptr;   // recorded on the user's stream at each call (both modes)
  DeviceIo io;
  std::shared_ptr<ScratchPool> scratch;
  std::unique_ptr<GpuAsync> async;  // ZCX_GPU_ASYNC: the progress thread

  ~Impl();
  Status wait_for(cudaStream_t user) const;
};

GpuRunner::Impl::~Impl() {
  async.reset();  // its thread uses the stream and pools below
  CudaDeviceGuard guard(device);
  if (queued != nullptr) (void)cuda_shim()->event_destroy(queued);
  if (stream != nullptr) (void)cuda_shim()->stream_destroy(stream);
}

// The work queued on `user` before this point (wait_stream_input, gpu_async.h).
Status GpuRunner::Impl::wait_for(cudaStream_t user) const {
  const CudaApi* api = cuda_shim();
  ZCX_TRY(cuda_check(api->event_record(queued, user), "cudaEventRecord (the call's stream)"));
  return wait_stream_input(queued, nullptr);
}

GpuRunner::GpuRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuRunner::~GpuRunner() = default;

Status GpuRunner::create(int device, std::unique_ptr<GpuRunner>* out) {
  std::string why;
  if (cuda_shim_load(&why) == nullptr)
    return set_error(Status::kUnsupported, kLogColl, "stream-ordered collectives: %s", why.c_str());
  auto impl = std::make_unique<Impl>();
  impl->device = device, impl->staging = gpu_staging.get();
  CudaDeviceGuard guard(device);
  ZCX_TRY(guard.status());
  const CudaApi* api = cuda_shim();
  ZCX_CUDACHECK(api->stream_create_with_flags(&impl->stream, cudaStreamNonBlocking));
  ZCX_CUDACHECK(api->event_create_with_flags(&impl->queued, cudaEventDisableTiming));
  impl->io.stream = impl->stream;
  impl->io.flush_gdr_writes = needs_gdr_flush(device);
  impl->io.pinned = std::make_shared<ScratchPool>(pinned_memory());
  impl->scratch = std::make_shared<ScratchPool>(device_memory(device));
  if (gpu_async_enabled())
    ZCX_TRY(GpuAsync::create(device, impl->queued, impl->io.pinned, &impl->async));
  ZCX_INFO(kLogColl, "stream-ordered collectives on device %d (%s, %s; %s)", device,
           impl->staging ? "staged through pinned host memory"
                         : "cuda_ipc where it reaches, GPUDirect RDMA where the provider has it",
           impl->async ? "asynchronous" : "synchronous",
           impl->io.flush_gdr_writes ? "GPUDirect writes flushed at the GPU where the provider "
                                       "has no iflush"
                                     : "the GPU orders GPUDirect writes itself");
  out->reset(new GpuRunner(std::move(impl)));
  return Status::kSuccess;
}

Status GpuRunner::run(Comm& comm, std::vector<OpArgs> calls, void* stream) {
  CudaDeviceGuard guard(impl_->device);  // kernels, copies and allocations of this call
  ZCX_TRY(guard.status());
  for (OpArgs& a : calls) a.device = impl_->device;
  if (impl_->async) return impl_->async->submit(comm, calls, stream);
  ZCX_TRY(impl_->wait_for(static_cast<cudaStream_t>(stream)));
  if (!is_p2p(calls)) return comm.run(calls.front());
  std::shared_ptr<Op> op;
  ZCX_TRY(comm.post_group(calls, &op));
  return comm.wait(*op);
}

Status GpuRunner::quiesce() { return impl_->async ? impl_->async->quiesce() : Status::kSuccess; }
Status GpuRunner::async_error(const Comm& comm) const {
  return impl_->async ? impl_->async->error(comm) : comm.async_error();
}
void GpuRunner::stop() { impl_->async.reset(); }  // ~GpuAsync ends a call in flight

int GpuRunner::device() const { return impl_->device; }
bool GpuRunner::staging() const { return impl_->staging; }
const DeviceIo* GpuRunner::io() const { return &impl_->io; }
std::shared_ptr<ScratchPool> GpuRunner::device_scratch() const { return impl_->scratch; }

Status GpuRunner::finalize_avg(zcx_dtype_t dtype, void* buf, size_t count, int nranks) {
  ZCX_TRY(cuda::finalize_avg_async(dtype, buf, count, nranks, impl_->stream));
  return cuda_check(cuda_shim()->stream_synchronize(impl_->stream), "cudaStreamSynchronize");
}

#else  // no CUDA in this build: no runner can be made

Status device_of_call(const OpArgs&, int, int*) {
  return set_error(Status::kUnsupported, kLogColl,
                   "a call with a CUDA stream: this libzcx was built without CUDA");
}

struct GpuRunner::Impl {};
GpuRunner::GpuRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuRunner::~GpuRunner() = default;
Status GpuRunner::create(int, std::unique_ptr<GpuRunner>*) {
  return set_error(Status::kUnsupported, kLogColl,
                   "stream-ordered (GPU) collectives: this libzcx was built without CUDA");
}
int GpuRunner::device() const { return -1; }
bool GpuRunner::staging() const { return gpu_staging.get(); }
Status GpuRunner::run(Comm&, std::vector<OpArgs>, void*) { return Status::kUnsupported; }
Status GpuRunner::quiesce() { return Status::kSuccess; }
Status GpuRunner::async_error(const Comm& comm) const { return comm.async_error(); }
void GpuRunner::stop() {}
const DeviceIo* GpuRunner::io() const { return nullptr; }
std::shared_ptr<ScratchPool> GpuRunner::device_scratch() const { return nullptr; }
Status GpuRunner::finalize_avg(zcx_dtype_t, void*, size_t, int) { return Status::kUnsupported; }

#endif

}  // namespace zcx::coll
