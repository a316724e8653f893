// The progress thread of asynchronous stream-ordered calls (gpu_async.h).
#include "core/gpu_async.h"

#include "common/clock.h"
#include "common/config.h"
#include "common/config_vars.h"
#include "common/gpu_hold.h"
#include "common/log.h"
#include "core/comm.h"
#include "core/gpu_runner.h"
#include "zcx/config.h"

#if ZCX_HAVE_CUDA
#include "common/dl/cuda_shim.h"
#include "reduce/cuda/reduce_cuda.h"
#endif

#include <atomic>
#include <cstdio>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zcx::coll {
namespace {

const config::BoolParam gpu_async{
    "ZCX_GPU_ASYNC", true,
    "Stream-ordered (GPU) collectives return once queued behind the stream's work, and a "
    "progress thread runs them (as NCCL's do). 0: each call waits for the stream's earlier "
    "work, runs the operation, and returns when the result is in place."};
const config::DoubleParam gpu_stream_timeout{
    "ZCX_GPU_STREAM_TIMEOUT", 0.0,
    "Seconds an asynchronous stream-ordered call may hold its stream before the stream goes "
    "on without the result (the call then fails at the next one). 0: ZCX_TIMEOUT + 30.", 0,
    1e9};

}  // namespace

bool gpu_async_enabled() { return gpu_async.get(); }

#if ZCX_HAVE_CUDA

namespace {

uint64_t stream_bound_ns() {
  const double s = gpu_stream_timeout.get();
  const int64_t ms = s > 0 ? static_cast<int64_t>(s * 1000) : params::timeout_ms() + 30000;
  return static_cast<uint64_t>(ms) * 1000000;
}

}  // namespace

// The user's work queued before the call: polls `event` (recorded on the user's stream). Its
// duration is not a fault (cudaStreamSynchronize would wait as long); past ZCX_TIMEOUT it
// says once what it waits for. Polled, so a failed kernel shows as an error.
Status wait_stream_input(void* event, const std::atomic<bool>* aborting) {
  const int64_t start = now_ns(), warn_at = start + params::timeout_ms() * 1000000;
  WaitPacer pacer;
  for (bool warned = false;;) {
    if (aborting != nullptr && *aborting)
      return set_error(Status::kAborted, kLogColl, "stream-ordered call aborted");
    cudaError_t e = cuda_shim()->event_query(static_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) return Status::kSuccess;
    if (e != cudaErrorNotReady) return cuda_check(e, "cudaEventQuery (the call's stream)");
    pacer.pause([start] { return start; });
    if (warned || now_ns() < warn_at) continue;
    warned = true;
    ZCX_WARN(kLogColl, "a stream-ordered call still waits, after ZCX_TIMEOUT, for the work "
             "queued on its stream before it");
  }
}

struct GpuAsync::Impl {
  int device = -1;
  cudaEvent_t input = nullptr;   // the runner's: recorded on the user's stream at each call
  std::shared_ptr<ScratchPool> pinned;  // the runner's bounce buffers
  uint32_t* words = nullptr;     // pinned: [0] the ticket posted, [1] a ticket the wait gave up on
  uint32_t ticket = 0;           // the last ticket handed out
  std::atomic<bool> aborting{false};
  std::atomic<int> failed{0};    // a Status, readable without the lock

  std::mutex mu;                 // guards the fields below
  std::condition_variable cv;
  Comm* comm = nullptr;
  std::shared_ptr<Op> op;        // the call in flight (set: the thread owns comm)
  bool stop = false;
  std::string failure;           // the message of `failed`
  std::thread thread;

  ~Impl();
  void loop();
  Status run_one(Comm& c, const std::shared_ptr<Op>& o);
  void fail(Status st, std::string message);
  void post(uint32_t t) { __atomic_store_n(&words[0], t, __ATOMIC_RELEASE); }
  // Whether a stream wait gave up; then: what followed, or "". quiet: do not log.
  Status check_wait(const std::string& then, bool quiet) const;
};

GpuAsync::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    if (op != nullptr) comm->request_abort();  // the call in flight fails at its next poll
  }
  aborting = true;  // or, still waiting for its input, stops waiting
  cv.notify_all();
  if (thread.joinable()) thread.join();
  CudaDeviceGuard guard(device);
  gpu_hold::run_deferred();  // what the last call's transfers left to close
  if (words != nullptr) (void)cuda_shim()->host_free(words);
}

void GpuAsync::Impl::fail(Status st, std::string message) {
  std::lock_guard<std::mutex> lock(mu);
  if (failed.load() != 0) return;
  failure = std::move(message);
  failed = static_cast<int>(st);
}

void GpuAsync::Impl::loop() {
  // cudaSetDevice, not a guard: it also makes the device's primary context current on this
  // new thread, which the kernel launches (cuCtxGetCurrent) need.
  const Status on_device = cuda_check(cuda_shim()->set_device(device), "cudaSetDevice");
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return stop || op != nullptr; });
    if (op == nullptr) return;
    std::shared_ptr<Op> o = op;
    Comm* c = comm;
    const uint32_t t = ticket;
    lock.unlock();
    Status st = on_device;
    if (st == Status::kSuccess) st = run_one(*c, o);
    else c->abort();  // planned, never queued: this rank left the peers' sequence
    if (st != Status::kSuccess) fail(st, last_error());
    post(t);  // the stream goes on, with the result or after a failure that is now sticky
    gpu_hold::end();
    lock.lock();
    op.reset();
    cv.notify_all();
  }
}

// An abort (~Impl) ends the wait for the input here, and the operation through the
// communicator's own abort request (Comm::wait fails at its next poll).
Status GpuAsync::Impl::run_one(Comm& c, const std::shared_ptr<Op>& o) {
  Status st = wait_stream_input(input, &aborting);
  if (st != Status::kSuccess) {
    c.abort();  // planned, never queued: this rank left the peers' sequence
    return st;
  }
  c.enqueue(o);
  return c.wait(*o);
}

Status GpuAsync::Impl::check_wait(const std::string& then, bool quiet) const {
  const uint32_t gave_up = __atomic_load_n(&words[1], __ATOMIC_ACQUIRE);
  if (gave_up == 0) return Status::kSuccess;
  char msg[256];
  std::snprintf(msg, sizeof msg,
                "stream-ordered call %u held its stream for ZCX_GPU_STREAM_TIMEOUT (%.1f s) "
                "without finishing; the stream went on without its result",
                gave_up, static_cast<double>(stream_bound_ns()) / 1e9);
  return quiet ? set_error_quiet(Status::kTimeout, "%s%s", msg, then.c_str())
               : set_error(Status::kTimeout, kLogColl, "%s%s", msg, then.c_str());
}

GpuAsync::GpuAsync(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuAsync::~GpuAsync() = default;

Status GpuAsync::create(int device, void* input, std::shared_ptr<ScratchPool> pinned,
                        std::unique_ptr<GpuAsync>* out) {
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->input = static_cast<cudaEvent_t>(input);
  impl->pinned = std::move(pinned);
  void* words = nullptr;
  ZCX_CUDACHECK(cuda_shim()->host_alloc(&words, 2 * sizeof(uint32_t)));
  impl->words = static_cast<uint32_t*>(words);
  impl->words[0] = impl->words[1] = 0;
  ZCX_TRY(cuda::load_kernels());  // a module load may wait for the device: not while holding
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  out->reset(new GpuAsync(std::move(impl)));
  return Status::kSuccess;
}

Status GpuAsync::quiesce() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  m.cv.wait(lock, [&] { return m.op == nullptr; });
  // A stream that went on without a result says so first: its later work read wrong data.
  const std::string then = m.failure.empty() ? "" : "; the call then failed: " + m.failure;
  if (m.check_wait(then, /*quiet=*/false) != Status::kSuccess) return Status::kTimeout;
  if (m.failed.load() != 0)
    return set_error(static_cast<Status>(m.failed.load()), kLogColl, "%s", m.failure.c_str());
  return Status::kSuccess;
}

Status GpuAsync::error(const Comm& comm) const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (Status st = m.check_wait("", /*quiet=*/true); st != Status::kSuccess) return st;
  if (m.failed.load() != 0)
    return set_error_quiet(static_cast<Status>(m.failed.load()), "%s", m.failure.c_str());
  return m.op == nullptr ? comm.async_error() : Status::kSuccess;
}

namespace {

// What the operation's transfers need, made on the caller's thread: their data endpoints
// (connecting cuda_ipc makes CUDA calls) and, for staged ones, pinned bounce buffers, taken
// from the pool and given back so that the executor's takes on the progress thread find them
// (the pool keeps every block; its best fit serves any subset of these sizes).
Status provision(Comm& comm, const Op& op, const std::shared_ptr<ScratchPool>& pinned) {
  std::vector<ScratchBlock> blocks;
  for (const Task& t : op.sched.tasks()) {
    if (t.kind != TaskKind::kSend && t.kind != TaskKind::kRecv) continue;
    Endpoint* ep = nullptr;
    bool staged = false;
    ZCX_TRY(comm.data_endpoint(t.peer, &ep, &staged));
    if (staged && t.bytes > 0) blocks.emplace_back(pinned, t.bytes);
  }
  return Status::kSuccess;
}

}  // namespace

Status GpuAsync::submit(Comm& comm, const std::vector<OpArgs>& calls, void* user) {
  Impl& m = *impl_;
  ZCX_TRY(quiesce());
  // No call of this communicator holds a stream now: device-wide work left by the last one's
  // transfers (closing peer mappings) can run before the next hold.
  gpu_hold::run_deferred();
  ZCX_TRY(comm.drain());  // request-form operations run on this thread: finish them first
  std::shared_ptr<Op> op;
  ZCX_TRY(is_p2p(calls) ? comm.prepare_group(calls, &op) : comm.prepare(calls.front(), &op));
  Status st = provision(comm, *op, m.pinned);
  auto stream = static_cast<cudaStream_t>(user);
  if (st == Status::kSuccess)
    st = cuda_check(cuda_shim()->event_record(m.input, stream),
                    "cudaEventRecord (the call's stream)");
  const uint32_t t = m.ticket + 1 == 0 ? 1 : m.ticket + 1;  // 0 stays "none" in words[1]
  if (st == Status::kSuccess) {
    gpu_hold::begin();  // before the launch: a device-wide call from now on is deferred
    st = cuda::stream_wait_async(m.words, t, stream_bound_ns(), m.words + 1, stream);
    if (st != Status::kSuccess) gpu_hold::end();
  }
  if (st != Status::kSuccess) {  // planned, never run: this rank left the peers' sequence
    comm.abort();
    m.fail(st, last_error());
    return st;
  }
  std::lock_guard<std::mutex> lock(m.mu);
  m.ticket = t, m.comm = &comm, m.op = std::move(op);
  m.cv.notify_all();
  return Status::kSuccess;
}

#else  // no CUDA: GpuRunner never makes one

struct GpuAsync::Impl {};
GpuAsync::GpuAsync(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuAsync::~GpuAsync() = default;
Status GpuAsync::create(int, void*, std::shared_ptr<ScratchPool>, std::unique_ptr<GpuAsync>*) {
  return Status::kUnsupported;
}
Status GpuAsync::submit(Comm&, const std::vector<OpArgs>&, void*) {
  return Status::kUnsupported;
}
Status GpuAsync::quiesce() { return Status::kSuccess; }
Status GpuAsync::error(const Comm& comm) const { return comm.async_error(); }

#endif

}  // namespace zcx::coll
