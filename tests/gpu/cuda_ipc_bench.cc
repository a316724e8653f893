// zcx-gpu-bench: cuda_ipc bandwidth between two processes sharing the GPU(s), next to
// cudaMemcpy device-to-device inside one process, in the same run. Each figure is the
// median of the iterations with min and max. An iteration moves `window` messages: with
// window 1 a cuda_ipc iteration is one whole message (the receiver's POST, the sender's copy
// and the DONE) and a D2D one is cudaMemcpy + synchronize; with window 8 (perftest's way of
// measuring bandwidth: several in flight) the receiver posts 8 receives and the sender 8
// sends, and D2D enqueues 8 cudaMemcpyAsync before one stream synchronize. Without a GPU it
// prints why and exits 0 (run.sh calls it only on GPU machines).
//   usage: zcx-gpu-bench [iterations [largest message in bytes]]
// (the simulated runtime's ctest entry stops at 16 MiB: there the figures mean nothing, and
// 256 MiB windows only add page faults)
#include "cuda_ipc_util.h"
#include "gpu_test_util.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>

namespace zcx::gpu_test {
namespace {

constexpr size_t kSizes[] = {size_t(64) << 10, size_t(1) << 20, size_t(16) << 20,
                             size_t(256) << 20};
constexpr int kWindows[] = {1, 8};
constexpr int kMaxIters = 64;
// How many of kSizes (ascending) are at most `largest`.
size_t sizes_up_to(size_t largest) {
  return static_cast<size_t>(std::upper_bound(std::begin(kSizes), std::end(kSizes), largest) -
                             std::begin(kSizes));
}
// Where rank 1's timings go in the shared array: [window][size][iteration].
size_t slot(size_t wi, size_t si, int i) {
  return (wi * std::size(kSizes) + si) * kMaxIters + static_cast<size_t>(i);
}

struct Stats {
  double med = 0, min = 0, max = 0;  // GB/s
};

Stats summarise(std::vector<double> secs, size_t bytes) {
  std::sort(secs.begin(), secs.end());
  auto gbs = [&](double s) { return static_cast<double>(bytes) / s / 1e9; };
  return {gbs(secs[secs.size() / 2]), gbs(secs.back()), gbs(secs.front())};
}

// `window` copies of `bytes` per iteration (distinct buffers), then one synchronize.
Stats memcpy_d2d(size_t bytes, int window, int iters) {
  const CudaApi* api = cuda_shim();
  std::vector<std::unique_ptr<DeviceBuffer>> from, to;
  for (int k = 0; k < window; ++k) {
    from.push_back(std::make_unique<DeviceBuffer>(Alloc::kCudaMalloc, 0, bytes));
    to.push_back(std::make_unique<DeviceBuffer>(Alloc::kCudaMalloc, 0, bytes));
  }
  std::vector<double> secs;
  for (int i = 0; i < iters + 1; ++i) {
    int64_t t0 = now_ns();
    for (int k = 0; k < window; ++k)
      (void)api->copy_async(to[k]->data(), from[k]->data(), bytes, cudaMemcpyDeviceToDevice,
                            nullptr);
    (void)api->device_synchronize();
    if (i > 0) secs.push_back(static_cast<double>(now_ns() - t0) / 1e9);  // first: warm-up
  }
  return summarise(secs, bytes * static_cast<size_t>(window));
}

// One iteration of `window` messages from rank 0 to rank 1 on distinct buffers.
bool move_window(Mesh& m, int rank, std::vector<std::unique_ptr<DeviceBuffer>>& bufs,
                 size_t bytes, int window) {
  const int peer = 1 - rank;
  std::vector<void*> req(static_cast<size_t>(window), nullptr);
  for (int k = 0; k < window; ++k) {
    void* data = bufs[k]->data();
    size_t cap = bytes;
    zcx_status_t s = rank == 1
        ? ipc_ops()->irecv(m.rc[peer], 1, &data, &cap, nullptr, nullptr, &req[k])
        : ipc_ops()->isend(m.sc[peer], data, bytes, 0, nullptr, &req[k]);
    if (s != ZCX_SUCCESS || req[k] == nullptr) return false;
  }
  return wait_all(req, nullptr);
}

// Rank 0 sends, rank 1 receives; both time each message; rank 1 reports through the board.
int ipc_rank(Board* b, int rank, int iters, size_t nsizes, double* out) {
  int ndev = 0;
  if (cuda_device_count(nullptr) <= 0) return fail(b, rank, "no device");
  (void)cuda_shim()->get_device_count(&ndev);
  (void)cuda_shim()->set_device(rank % ndev);
  Mesh m;
  if (!mesh_connect(b, rank, 2, rank % ndev, &m)) return 1;
  int step = 0;
  for (size_t wi = 0; wi < std::size(kWindows); ++wi) {
    for (size_t si = 0; si < nsizes; ++si) {
      const size_t bytes = kSizes[si];
      std::vector<std::unique_ptr<DeviceBuffer>> bufs;
      for (int k = 0; k < kWindows[wi]; ++k)
        bufs.push_back(std::make_unique<DeviceBuffer>(Alloc::kCudaMalloc, rank % ndev, bytes));
      for (int i = 0; i < iters + 1; ++i) {
        int64_t t0 = now_ns();
        if (!move_window(m, rank, bufs, bytes, kWindows[wi])) return fail(b, rank, "transfer");
        if (i > 0 && rank == 1) out[slot(wi, si, i - 1)] = static_cast<double>(now_ns() - t0) / 1e9;
      }
      if (!board_barrier(b, 2, ++step)) return fail(b, rank, "barrier");
    }
  }
  return 0;
}

int bench_main(int iters, size_t nsizes) {
  const Probe& p = gpus();
  if (p.ndev < 1) {
    std::printf("zcx-gpu-bench: skipped: no CUDA device: %s\n", p.why);
    return 0;
  }
  test::ForkShared<Board> board;
  test::ForkShared<double> timings(std::size(kWindows) * std::size(kSizes) * kMaxIters);
  Board* b = board.get();
  double* secs = timings.get();
  if (!board.ok() || !timings.ok()) {
    std::printf("error: mmap for the board or the timings failed\n");
    return 1;
  }
  int failed =
      test::fork_ranks(2, [&](int r) { return ipc_rank(b, r, iters, nsizes, secs); }, 240000);
  for (int r = 0; r < 2; ++r)
    if (b->error[r][0]) std::printf("error: %s\n", b->error[r]);
  // CUDA is initialised in this process only after the ranks have been forked.
  std::string why;
  if (cuda_shim_load(&why) == nullptr || cuda_shim()->set_device(0) != cudaSuccess) {
    std::printf("error: CUDA in the bench process: %s\n", why.c_str());
    return 1;
  }
  std::printf("%6s  %12s  %-36s  %-36s  %s\n", "window", "bytes",
              "cuda_ipc GB/s median (min-max)", "cudaMemcpy D2D GB/s median (min-max)", "ratio");
  for (size_t wi = 0; wi < std::size(kWindows) && failed == 0; ++wi)
    for (size_t si = 0; si < nsizes; ++si) {
      const int w = kWindows[wi];
      const size_t bytes = kSizes[si] * static_cast<size_t>(w);
      const double* first = secs + slot(wi, si, 0);
      Stats ipc = summarise(std::vector<double>(first, first + iters), bytes);
      Stats d2d = memcpy_d2d(kSizes[si], w, iters);
      std::printf("%6d  %12zu  %8.1f (%.1f-%.1f)%18s  %8.1f (%.1f-%.1f)%18s  %.2f\n", w,
                  kSizes[si], ipc.med, ipc.min, ipc.max, "", d2d.med, d2d.min, d2d.max, "",
                  ipc.med / d2d.med);
    }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace zcx::gpu_test

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  iters = std::clamp(iters, 1, zcx::gpu_test::kMaxIters);
  const size_t largest = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : size_t{256} << 20;
  const size_t nsizes = zcx::gpu_test::sizes_up_to(largest);
  if (nsizes == 0) {
    std::printf("usage: zcx-gpu-bench [iterations [largest message in bytes, >= 65536]]\n");
    return 2;
  }
  return zcx::gpu_test::bench_main(iters, nsizes);
}
