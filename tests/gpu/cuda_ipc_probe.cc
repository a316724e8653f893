// zcx-gpu-probe: facts about this CUDA driver that the asynchronous stream-ordered calls
// depend on (docs/ARCHITECTURE.md "GPU collectives"), measured rather than assumed:
//   export does cudaIpcGetMemHandle wait for the whole device (here: a zcx_stream_wait
//          kernel holding another stream)?
//   open   does cudaIpcOpenMemHandle?
//   reopen when the exporter freed an allocation and got the same range back, does opening
//          the new handle succeed while the old mapping is still open?
//   close  does cudaIpcCloseMemHandle wait for the whole device?
// Two forked processes on GPU 0: rank 0 exports, rank 1 imports. A call "waits" when it
// returns only once another thread released the holding kernel (after kReleaseMs).
// Without a GPU it prints why and exits 0 (run.sh calls it only on GPU machines).
//   usage: zcx-gpu-probe [--expect export=no,open=no,reopen=ok,close=yes]
// --expect (used against the simulated runtime in CI): exit 1 unless each listed fact came
// out as given (export/open/close: yes = waits, no = does not; reopen: ok or the error
// name).
#include "cuda_ipc_util.h"
#include "gpu_test_util.h"
#include "reduce/cuda/reduce_cuda.h"

#include <chrono>
#include <cstring>
#include <thread>

namespace zcx::gpu_test {
namespace {

constexpr size_t kBytes = size_t(64) << 20;
constexpr int kReleaseMs = 1000;
constexpr uint64_t kBoundNs = uint64_t(5) * 1000 * 1000 * 1000;  // the kernel's own limit

struct Shared {
  std::atomic<int> step{0};
  cudaIpcMemHandle_t a{}, b{};
  uint64_t base_a = 0, base_b = 0;
  double export_ms = -1, open_ms = -1, close_ms = -1;
  int reopen = -1;  // cudaError_t of opening b while a's mapping is open
  char error[2][256] = {};
};

bool wait_step(Shared* s, int at_least) {
  Deadline dl = Deadline::after_ms(30000);
  while (s->step.load() < at_least) {
    if (dl.expired()) return false;
    usleep(100);  // the other rank may be timing a call: leave it the CPU
  }
  return true;
}

int failed(Shared* s, int rank, const char* what, cudaError_t e = cudaSuccess) {
  const char* name = e == cudaSuccess ? "" : cuda_shim()->get_error_name(e);
  std::snprintf(s->error[rank], sizeof s->error[rank], "rank %d: %s %s", rank, what, name);
  return 1;
}

// A stream of this process to hold, and the pinned words its zcx_stream_wait polls.
struct Holder {
  cudaStream_t stream = nullptr;
  uint32_t* words = nullptr;  // [0] the ticket posted, [1] a ticket the kernel gave up on
  uint32_t ticket = 0;
};

bool start_cuda(Holder* h) {
  std::string why;
  const CudaApi* api = cuda_shim_load(&why);
  void* words = nullptr;
  if (api == nullptr || api->set_device(0) != cudaSuccess ||
      coll::cuda::load_kernels() != Status::kSuccess ||
      api->stream_create_with_flags(&h->stream, cudaStreamNonBlocking) != cudaSuccess ||
      api->host_alloc(&words, 2 * sizeof(uint32_t)) != cudaSuccess)
    return false;
  h->words = static_cast<uint32_t*>(words);
  h->words[0] = h->words[1] = 0;
  return true;
}

// How long `call` takes while h's stream is held by zcx_stream_wait, which another thread
// releases after kReleaseMs; -1 when the hold could not be launched.
double ms_under_hold(Holder* h, const std::function<void()>& call) {
  const uint32_t ticket = ++h->ticket;
  uint32_t* words = h->words;
  if (coll::cuda::stream_wait_async(words, ticket, kBoundNs, words + 1, h->stream) !=
      Status::kSuccess)
    return -1;
  std::thread release([words, ticket] {
    std::this_thread::sleep_for(std::chrono::milliseconds(kReleaseMs));
    __atomic_store_n(&words[0], ticket, __ATOMIC_RELEASE);
  });
  const int64_t t0 = now_ns();
  call();
  const double took = static_cast<double>(now_ns() - t0) / 1e6;
  release.join();
  (void)cuda_shim()->stream_synchronize(h->stream);
  return took;
}

int exporter(Shared* s) {
  Holder h;
  if (!start_cuda(&h)) return failed(s, 0, "CUDA on device 0 with zcx's kernels");
  const CudaApi* api = cuda_shim();
  void* a = nullptr;
  void* b = nullptr;
  cudaError_t e = api->mem_alloc(&a, kBytes);
  if (e != cudaSuccess) return failed(s, 0, "allocation A", e);
  s->export_ms = ms_under_hold(&h, [&] { e = api->ipc_get_mem_handle(&s->a, a); });
  if (e != cudaSuccess || s->export_ms < 0) return failed(s, 0, "handle A under a hold", e);
  s->base_a = reinterpret_cast<uintptr_t>(a);
  s->step = 1;
  if (!wait_step(s, 2)) return failed(s, 0, "the importer did not open A");
  (void)api->mem_free(a);  // the importer keeps its mapping of A open
  e = api->mem_alloc(&b, kBytes);
  if (e == cudaSuccess) e = api->ipc_get_mem_handle(&s->b, b);
  if (e != cudaSuccess) return failed(s, 0, "allocation or handle B", e);
  s->base_b = reinterpret_cast<uintptr_t>(b);
  s->step = 3;
  if (!wait_step(s, 4)) return failed(s, 0, "the importer did not finish");
  (void)api->mem_free(b);
  return 0;
}

int importer(Shared* s) {
  Holder h;
  if (!start_cuda(&h)) return failed(s, 1, "CUDA on device 0 with zcx's kernels");
  const CudaApi* api = cuda_shim();
  if (!wait_step(s, 1)) return failed(s, 1, "no handle A");
  void* pa = nullptr;
  void* pb = nullptr;
  cudaError_t e = cudaSuccess;
  s->open_ms = ms_under_hold(&h, [&] {
    e = api->ipc_open_mem_handle(&pa, s->a, cudaIpcMemLazyEnablePeerAccess); });
  if (e != cudaSuccess || s->open_ms < 0) return failed(s, 1, "open A under a hold", e);
  s->step = 2;
  if (!wait_step(s, 3)) return failed(s, 1, "no handle B");
  s->reopen = api->ipc_open_mem_handle(&pb, s->b, cudaIpcMemLazyEnablePeerAccess);
  s->close_ms = ms_under_hold(&h, [&] { e = api->ipc_close_mem_handle(pa); });
  if (e != cudaSuccess || s->close_ms < 0) return failed(s, 1, "close A under a hold", e);
  if (s->reopen == cudaSuccess) (void)api->ipc_close_mem_handle(pb);
  s->step = 4;
  return 0;
}

const char* waits(double ms) {
  if (ms >= 0.8 * kReleaseMs) return "yes";
  return ms < 0.3 * kReleaseMs ? "no" : "unclear";
}

// The facts as "open=..,reopen=..,close=.." (reopen: ok, the error name, or untested when
// the exporter got another range).
std::string facts(const Shared& s) {
  const char* reopen = s.base_a != s.base_b ? "untested"
                       : s.reopen == cudaSuccess
                           ? "ok"
                           : cuda_shim()->get_error_name(static_cast<cudaError_t>(s.reopen));
  return std::string("export=") + waits(s.export_ms) + ",open=" + waits(s.open_ms) +
         ",reopen=" + reopen + ",close=" + waits(s.close_ms);
}

// Whether every "key=value" of the comma-separated `expect` is among `got`'s.
bool holds(const std::string& got, const std::string& expect) {
  const std::string all = "," + got + ",";
  size_t from = 0;
  while (from <= expect.size()) {
    size_t to = expect.find(',', from);
    if (to == std::string::npos) to = expect.size();
    if (all.find("," + expect.substr(from, to - from) + ",") == std::string::npos) return false;
    from = to + 1;
  }
  return true;
}

void print_wait(const char* call, double ms) {
  std::printf("%s while a stream is held: returned after %.1f ms (released at %d ms): waits "
              "for the device: %s\n", call, ms, kReleaseMs, waits(ms));
}

void print(const Shared& s) {
  print_wait("cudaIpcGetMemHandle", s.export_ms);
  print_wait("cudaIpcOpenMemHandle", s.open_ms);
  if (s.base_a != s.base_b)
    std::printf("reopen of a reused range: not tested (the exporter got another range)\n");
  else
    std::printf("cudaIpcOpenMemHandle of a reused range with the old mapping open: %s\n",
                cuda_shim()->get_error_name(static_cast<cudaError_t>(s.reopen)));
  print_wait("cudaIpcCloseMemHandle", s.close_ms);
}

int probe_main(const char* expect) {
  const Probe& p = gpus();
  if (p.ndev < 1) {
    std::printf("zcx-gpu-probe: skipped: no CUDA device: %s\n", p.why);
    return 0;
  }
  test::ForkShared<Shared> shared;
  if (!shared.ok()) {
    std::printf("error: mmap failed\n");
    return 1;
  }
  Shared* s = shared.get();
  int bad = test::fork_ranks(2, [s](int r) { return r == 0 ? exporter(s) : importer(s); }, 60000);
  for (const char* e : s->error)
    if (e[0]) std::printf("error: %s\n", e);
  // CUDA in this process only after the ranks were forked (for the error names).
  std::string why;
  if (bad == 0 && cuda_shim_load(&why) != nullptr) {
    print(*s);
    const std::string got = facts(*s);
    std::printf("facts: %s\n", got.c_str());
    if (expect != nullptr && !holds(got, expect)) {
      std::printf("error: expected %s\n", expect);
      bad = 1;
    }
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace zcx::gpu_test

int main(int argc, char** argv) {
  const char* expect = nullptr;
  if (argc == 3 && std::strcmp(argv[1], "--expect") == 0) {
    expect = argv[2];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: zcx-gpu-probe [--expect export=no,open=no,close=yes]\n");
    return 2;
  }
  return zcx::gpu_test::probe_main(expect);
}
