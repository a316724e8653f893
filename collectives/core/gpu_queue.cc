// The GPU queue of a communicator (gpu_queue.h): stream hold points, the progress thread,
// device scratch and pinned bounce memory.
#include "core/gpu_queue.h"

#include "common/clock.h"
#include "common/config.h"
#include "common/config_vars.h"
#include "common/log.h"
#include "core/comm.h"
#include "zcx/config.h"

#if ZCX_HAVE_CUDA
#include "common/dl/cuda_shim.h"
#include "reduce/cuda/reduce_cuda.h"
#endif

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <thread>

namespace zcx::coll {
namespace {

const config::BoolParam gpu_staging{
    "ZCX_GPU_STAGING", false,
    "Stream-ordered (GPU) collectives move data through pinned host memory over the host "
    "providers even between ranks of one host that cuda_ipc reaches."};

}  // namespace

#if ZCX_HAVE_CUDA

namespace {

enum class ItemState { kQueued, kReady, kRunning, kDone };

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
};

struct Item {
  OpArgs args;
  std::shared_ptr<Shared> sh;
  ItemState state = ItemState::kQueued;  // guarded by sh->mu
  std::atomic<int64_t> moved_ns{0};      // last progress seen (bounds the stream's hold)
  int64_t hold_limit_ns = 0;
};

// CUDA's callback thread runs this when the user's stream reaches the call: everything
// queued before it has finished. It marks the call ready and holds the stream until the
// call has run, at most hold_limit_ns without progress. It calls no CUDA API (a host
// function must not).
void CUDART_CB stream_reached(void* p) {
  std::unique_ptr<std::shared_ptr<Item>> hold(static_cast<std::shared_ptr<Item>*>(p));
  Item& it = **hold;
  std::unique_lock<std::mutex> lock(it.sh->mu);
  if (it.state == ItemState::kQueued) it.state = ItemState::kReady;
  it.moved_ns = now_ns();
  it.sh->cv.notify_all();
  while (it.state != ItemState::kDone) {
    it.sh->cv.wait_for(lock, std::chrono::milliseconds(20));
    if (it.state != ItemState::kDone && now_ns() - it.moved_ns > it.hold_limit_ns) {
      ZCX_WARN(kLogColl, "stream-ordered %s: no progress for %.1f s; its stream goes on without "
                "the result (the communicator reports the error)",
                coll_kind_name(it.args.kind), it.hold_limit_ns / 1e9);
      return;
    }
  }
}

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

}  // namespace

namespace {

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
    case CollKind::kReduce: *send = *recv = block; break;
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
                     "%s: %s is on device %d, the communicator's GPU queue on device %d", kind,
                     which, attr.device, *device);
  *device = attr.device;
  CUdeviceptr base = 0;
  size_t size = 0;
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  if (bytes != 0 && api->cu_mem_get_address_range(&base, &size, at) == CUDA_SUCCESS &&
      at + bytes > base + size)
    return set_error(Status::kInvalidArg, kLogColl,
                     "%s: %s needs %zu bytes from %p, past the end of its allocation (%zu bytes "
                     "from %p)", kind, which, bytes, p, size, reinterpret_cast<void*>(base));
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

struct GpuQueue::Impl {
  Comm* comm = nullptr;
  int device = -1;
  bool staging = false;
  int64_t timeout_ms = 0;
  cudaStream_t stream = nullptr;
  DeviceIo io;
  std::shared_ptr<ScratchPool> scratch;
  std::shared_ptr<Shared> sh = std::make_shared<Shared>();
  std::deque<std::shared_ptr<Item>> items;  // guarded by sh->mu
  StickyError err;                          // guarded by sh->mu
  std::atomic<bool> stop{false};
  std::thread thread;

  ~Impl();
  void loop();
  Status run(Item& it);
  Status run_op(Item& it);
  void finish_all();
};

GpuQueue::Impl::~Impl() {
  if (thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(sh->mu);
      stop = true;
    }
    sh->cv.notify_all();
    thread.join();
  }
  if (stream != nullptr) {
    CudaDeviceGuard guard(device);
    (void)cuda_shim()->stream_destroy(stream);
  }
}

// One call at a time, in enqueue order, each once its stream has reached it.
void GpuQueue::Impl::loop() {
  // Always set, even when cudaGetDevice already says `device`: a new thread has no current
  // context until cudaSetDevice makes the primary one current (the kernels load into it).
  Status dev = cuda_check(cuda_shim()->set_device(device), "cudaSetDevice (GPU queue thread)");
  std::unique_lock<std::mutex> lock(sh->mu);
  if (dev != Status::kSuccess) err.record(dev, last_error()), stop = true;
  for (;;) {
    sh->cv.wait(lock, [&] {
      return stop || (!items.empty() && items.front()->state == ItemState::kReady);
    });
    if (stop) break;
    std::shared_ptr<Item> it = items.front();
    it->state = ItemState::kRunning;
    lock.unlock();
    Status st = run(*it);
    lock.lock();
    if (st != Status::kSuccess && !err.has()) err.record(st, last_error());
    it->state = ItemState::kDone;
    items.pop_front();
    sh->cv.notify_all();
  }
  finish_all();
}

// Under sh->mu: every call still queued fails and releases its stream.
void GpuQueue::Impl::finish_all() {
  if (!items.empty() && !err.has())
    err.record(Status::kAborted, "stream-ordered operations were aborted");
  for (auto& it : items) it->state = ItemState::kDone;
  items.clear();
  sh->cv.notify_all();
}

Status GpuQueue::Impl::run(Item& it) {
  try {
    return run_op(it);
  } catch (const std::bad_alloc&) {
    return set_error(Status::kNoMemory, kLogColl,
                     "stream-ordered %s: out of memory (device scratch or pinned staging)",
                     coll_kind_name(it.args.kind));
  } catch (...) {
    return set_error(Status::kInternal, kLogColl, "stream-ordered %s: unexpected exception",
                     coll_kind_name(it.args.kind));
  }
}

Status GpuQueue::Impl::run_op(Item& it) {
  std::shared_ptr<Op> op;
  ZCX_TRY(comm->post(it.args, &op));
  WaitPacer pacer;
  for (;;) {
    if (stop)
      return set_error(Status::kAborted, kLogColl, "stream-ordered %s was aborted",
                       coll_kind_name(it.args.kind));
    bool done = false;
    ZCX_TRY(comm->test(*op, &done));
    if (done) return Status::kSuccess;
    it.moved_ns = comm->last_activity_ns();
    pacer.pause([this] { return comm->last_activity_ns(); });
  }
}

GpuQueue::GpuQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuQueue::~GpuQueue() = default;

Status GpuQueue::create(Comm* comm, int device, std::unique_ptr<GpuQueue>* out) {
  std::string why;
  if (cuda_shim_load(&why) == nullptr)
    return set_error(Status::kUnsupported, kLogColl, "stream-ordered collectives: %s", why.c_str());
  auto impl = std::make_unique<Impl>();
  impl->comm = comm, impl->device = device, impl->staging = gpu_staging.get();
  impl->timeout_ms = params::timeout_ms();
  {
    CudaDeviceGuard guard(device);
    ZCX_TRY(guard.status());
    ZCX_CUDACHECK(cuda_shim()->stream_create_with_flags(&impl->stream, cudaStreamNonBlocking));
  }
  impl->io.stream = impl->stream;
  impl->io.pinned = std::make_shared<ScratchPool>(pinned_memory());
  impl->scratch = std::make_shared<ScratchPool>(device_memory(device));
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  out->reset(new GpuQueue(std::move(impl)));
  ZCX_INFO(kLogColl, "communicator '%s': GPU queue on device %d (%s)", comm->name().c_str(),
           device, raw->staging ? "staged through pinned host memory" : "cuda_ipc where it reaches");
  return Status::kSuccess;
}

Status GpuQueue::enqueue(const OpArgs& a, void* stream) {
  auto it = std::make_shared<Item>();
  it->args = a;
  it->args.device = impl_->device;
  it->sh = impl_->sh;
  it->hold_limit_ns = (impl_->timeout_ms + 5000) * 1000000;
  {
    std::lock_guard<std::mutex> lock(impl_->sh->mu);
    if (impl_->stop) return set_error(Status::kAborted, kLogColl, "the GPU queue was stopped");
    impl_->items.push_back(it);
  }
  auto* hold = new std::shared_ptr<Item>(it);
  cudaError_t e = cuda_shim()->launch_host_func(static_cast<cudaStream_t>(stream),
                                                stream_reached, hold);
  if (e == cudaSuccess) return Status::kSuccess;
  delete hold;
  std::lock_guard<std::mutex> lock(impl_->sh->mu);  // still queued, never ready: take it back
  if (!impl_->items.empty() && impl_->items.back() == it) impl_->items.pop_back();
  return cuda_check(e, "cudaLaunchHostFunc (the stream given to a zcx collective)");
}

Status GpuQueue::quiesce(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(impl_->sh->mu);
  size_t seen = impl_->items.size();
  int64_t changed = now_ns();
  while (!impl_->items.empty()) {
    impl_->sh->cv.wait_for(lock, std::chrono::milliseconds(20));
    const int64_t now = now_ns();
    if (impl_->items.size() != seen) seen = impl_->items.size(), changed = now;
    int64_t moved = impl_->items.empty() ? now : impl_->items.front()->moved_ns.load();
    if (now - std::max(changed, moved) > timeout_ms * 1000000)
      return set_error(Status::kTimeout, kLogColl,
                       "%zu stream-ordered operations are still queued after %.1f s without "
                       "progress; a host call on the same communicator waits for them (has "
                       "their stream reached them?)", seen, timeout_ms / 1000.0);
  }
  return Status::kSuccess;
}

void GpuQueue::abort() {
  {
    std::lock_guard<std::mutex> lock(impl_->sh->mu);
    impl_->stop = true;
  }
  impl_->sh->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Status GpuQueue::error() const {
  std::lock_guard<std::mutex> lock(impl_->sh->mu);
  return impl_->err.has() ? impl_->err.raise() : Status::kSuccess;
}

bool GpuQueue::idle() const {
  std::lock_guard<std::mutex> lock(impl_->sh->mu);
  return impl_->items.empty();
}

int GpuQueue::device() const { return impl_->device; }
bool GpuQueue::staging() const { return impl_->staging; }
const DeviceIo* GpuQueue::io() const { return &impl_->io; }
std::shared_ptr<ScratchPool> GpuQueue::device_scratch() const { return impl_->scratch; }

Status GpuQueue::finalize_avg(zcx_dtype_t dtype, void* buf, size_t count, int nranks) {
  ZCX_TRY(cuda::finalize_avg_async(dtype, buf, count, nranks, impl_->stream));
  return cuda_check(cuda_shim()->stream_synchronize(impl_->stream), "cudaStreamSynchronize");
}

#else  // no CUDA in this build: no queue can be made

Status device_of_call(const OpArgs&, int, int*) {
  return set_error(Status::kUnsupported, kLogColl,
                   "a call with a CUDA stream: this libzcx was built without CUDA");
}

struct GpuQueue::Impl {};
GpuQueue::GpuQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuQueue::~GpuQueue() = default;
Status GpuQueue::create(Comm*, int, std::unique_ptr<GpuQueue>*) {
  return set_error(Status::kUnsupported, kLogColl,
                   "stream-ordered (GPU) collectives: this libzcx was built without CUDA");
}
int GpuQueue::device() const { return -1; }
bool GpuQueue::staging() const { return gpu_staging.get(); }
Status GpuQueue::enqueue(const OpArgs&, void*) { return Status::kUnsupported; }
Status GpuQueue::quiesce(int64_t) { return Status::kSuccess; }
void GpuQueue::abort() {}
Status GpuQueue::error() const { return Status::kSuccess; }
bool GpuQueue::idle() const { return true; }
const DeviceIo* GpuQueue::io() const { return nullptr; }
std::shared_ptr<ScratchPool> GpuQueue::device_scratch() const { return nullptr; }
Status GpuQueue::finalize_avg(zcx_dtype_t, void*, size_t, int) { return Status::kUnsupported; }

#endif

}  // namespace zcx::coll
