// zcx-gpu-bench: cuda_ipc bandwidth between two processes sharing the GPU(s), next to
// cudaMemcpy device-to-device inside one process, in the same run. Each figure is the
// median of the iterations with min and max. A cuda_ipc iteration is one whole message:
// the receiver's POST, the sender's copy and the DONE. Without a GPU it prints why and
// exits 0 (run.sh calls it only on GPU machines).
//   usage: zcx-gpu-bench [iterations]
#include "cuda_ipc_util.h"
#include "gpu_test_util.h"

#include <algorithm>
#include <cstdlib>

namespace zcx::gpu_test {
namespace {

constexpr size_t kSizes[] = {size_t(64) << 10, size_t(1) << 20, size_t(16) << 20,
                             size_t(256) << 20};

struct Stats {
  double med = 0, min = 0, max = 0;  // GB/s
};

Stats summarise(std::vector<double> secs, size_t bytes) {
  std::sort(secs.begin(), secs.end());
  auto gbs = [&](double s) { return static_cast<double>(bytes) / s / 1e9; };
  return {gbs(secs[secs.size() / 2]), gbs(secs.back()), gbs(secs.front())};
}

Stats memcpy_d2d(size_t bytes, int iters) {
  const CudaApi* api = cuda_shim();
  DeviceBuffer a(Alloc::kCudaMalloc, 0, bytes), b(Alloc::kCudaMalloc, 0, bytes);
  std::vector<double> secs;
  for (int i = 0; i < iters + 1; ++i) {
    int64_t t0 = now_ns();
    (void)api->copy(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice);
    (void)api->device_synchronize();
    if (i > 0) secs.push_back(static_cast<double>(now_ns() - t0) / 1e9);  // first: warm-up
  }
  return summarise(secs, bytes);
}

// Rank 0 sends, rank 1 receives; both time each message; rank 1 reports through the board.
int ipc_rank(Board* b, int rank, int iters, double* out) {
  int ndev = 0;
  if (cuda_device_count(nullptr) <= 0) return fail(b, rank, "no device");
  (void)cuda_shim()->get_device_count(&ndev);
  (void)cuda_shim()->set_device(rank % ndev);
  Mesh m;
  if (!mesh_connect(b, rank, 2, rank % ndev, &m)) return 1;
  int peer = 1 - rank;
  for (size_t si = 0; si < std::size(kSizes); ++si) {
    size_t bytes = kSizes[si];
    DeviceBuffer buf(Alloc::kCudaMalloc, rank % ndev, bytes);
    for (int i = 0; i < iters + 1; ++i) {
      std::vector<void*> req(1, nullptr);
      void* data = buf.data();
      size_t cap = bytes;
      int64_t t0 = now_ns();
      zcx_status_t s = rank == 1
          ? ipc_ops()->irecv(m.rc[peer], 1, &data, &cap, nullptr, nullptr, &req[0])
          : ipc_ops()->isend(m.sc[peer], data, bytes, 0, nullptr, &req[0]);
      if (s != ZCX_SUCCESS || req[0] == nullptr || !wait_all(req, nullptr))
        return fail(b, rank, "transfer");
      if (i > 0 && rank == 1) out[si * 64 + (i - 1)] = static_cast<double>(now_ns() - t0) / 1e9;
    }
    if (!board_barrier(b, 2, static_cast<int>(si) + 1)) return fail(b, rank, "barrier");
  }
  return 0;
}

int bench_main(int iters) {
  const Probe& p = gpus();
  if (p.ndev < 1) {
    std::printf("zcx-gpu-bench: skipped: no CUDA device: %s\n", p.why);
    return 0;
  }
  Board* b = board_new();
  auto* secs = static_cast<double*>(mmap(nullptr, sizeof(double) * 64 * std::size(kSizes),
                                         PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  int failed = run_ranks(2, [&](int r) { return ipc_rank(b, r, iters, secs); }, 240000);
  for (int r = 0; r < 2; ++r)
    if (b->error[r][0]) std::printf("error: %s\n", b->error[r]);
  // CUDA is initialised in this process only after the ranks have been forked.
  std::string why;
  if (cuda_shim_load(&why) == nullptr || cuda_shim()->set_device(0) != cudaSuccess) {
    std::printf("error: CUDA in the bench process: %s\n", why.c_str());
    return 1;
  }
  std::printf("%12s  %-36s  %-36s\n", "bytes", "cuda_ipc GB/s median (min-max)",
              "cudaMemcpy D2D GB/s median (min-max)");
  for (size_t si = 0; si < std::size(kSizes) && failed == 0; ++si) {
    Stats ipc = summarise(std::vector<double>(secs + si * 64, secs + si * 64 + iters), kSizes[si]);
    Stats d2d = memcpy_d2d(kSizes[si], iters);
    std::printf("%12zu  %8.1f (%.1f-%.1f)%18s  %8.1f (%.1f-%.1f)\n", kSizes[si], ipc.med, ipc.min,
                ipc.max, "", d2d.med, d2d.min, d2d.max);
  }
  board_free(b);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace zcx::gpu_test

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  iters = std::clamp(iters, 1, 64);
  return zcx::gpu_test::bench_main(iters);
}
