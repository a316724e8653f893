// GPUDirect RDMA in the stream-ordered collectives, as far as a machine without a NIC that
// reaches GPU memory can show it: the ranks (threads of one process) talk over the fake
// provider "fakegdr" (tests/bootstrap/fake_provider.h), whose device says it takes GPU
// memory and wants receives into it flushed with its iflush, as ib does with nvidia_peermem
// or dmabuf. The collectives must then hand the provider the device buffers themselves
// (registered as ZCX_MEM_CUDA, no pinned bounce copy), flush each receive through the
// provider, and still produce the right sums. Over "fakegdr-noflush" (GPU memory, no iflush,
// as UCX) the GPU is flushed instead (cudaDeviceFlushGPUDirectRDMAWrites; the simulated
// device reports unordered writes). With ZCX_GPU_STAGING=1 none of that happens and the
// sums are the same. fakegdr copies on the CPU, so this runs only against the simulated
// CUDA runtime (tests/gpu/fake_cuda, whose device memory is host memory that fakegdr copies
// with the runtime's own access, as a NIC's DMA); elsewhere it skips and says so.
#include <gtest/gtest.h>
#include <zcx/coll.h>
#include <zcx/zcx.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/api_internal.h"
#include "bootstrap/fake_provider.h"
#include "bootstrap/test_util.h"
#include "common/config.h"
#include "cuda_ipc_util.h"
#include "gpu_test_util.h"

namespace zcx::gpu_test {
namespace {

constexpr int kRanks = 3;                      // a ring with a middle rank, and a tree
constexpr size_t kCounts[] = {1, 1000, 1 << 18};  // int32 elements: one chunk and many

// The simulated runtime's count of cudaDeviceFlushGPUDirectRDMAWrites calls, or nullptr
// when the loaded runtime is a real one.
using FlushCounter = FakeCounter;

template <typename Fail>
bool allreduce_once(const CudaApi* api, zcx_comm_t comm, cudaStream_t stream,
                    const DeviceBuffer& buf, size_t count, int rank, Fail& fail) {
  std::vector<int32_t> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = rank + 1 + static_cast<int32_t>(i % 7);
  api->copy(buf.data(), host.data(), count * 4, cudaMemcpyHostToDevice);
  zcx_status_t async = ZCX_SUCCESS;
  if (zcx_allreduce(buf.data(), buf.data(), count, ZCX_INT32, ZCX_SUM, comm, stream) ||
      api->stream_synchronize(stream) != cudaSuccess ||
      zcx_comm_get_async_error(comm, &async) != ZCX_SUCCESS || async != ZCX_SUCCESS) {
    fail("allreduce of " + std::to_string(count) + ": " + zcx_get_last_error());
    return false;
  }
  api->copy(host.data(), buf.data(), count * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count; ++i) {
    const int32_t want = kRanks * (kRanks + 1) / 2 + kRanks * static_cast<int32_t>(i % 7);
    if (host[i] != want) {
      fail("count " + std::to_string(count) + " element " + std::to_string(i) + ": " +
           std::to_string(host[i]) + ", want " + std::to_string(want));
      return false;
    }
  }
  return true;
}

// One rank: allreduce (sum) of int32 buffers filled with rank + 1 + i % 7, on its own stream,
// `repeats` times per size on the same buffer.
void allreduce_rank(int rank, const zcx_unique_id_t& id, int repeats, std::atomic<int>* failures) {
  const CudaApi* api = cuda_shim();
  zcx_context_t ctx = nullptr;
  zcx_comm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  auto fail = [&](const std::string& what) {
    ADD_FAILURE() << "rank " << rank << ": " << what;
    ++*failures;
  };
  if (zcx_init_rank(&ctx, kRanks, &id, rank) != ZCX_SUCCESS ||
      zcx_comm_init_context(&comm, ctx, nullptr) != ZCX_SUCCESS)
    return fail(std::string("init: ") + zcx_get_last_error());
  if (api->stream_create_with_flags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return fail("cudaStreamCreateWithFlags");
  for (size_t count : kCounts) {
    DeviceBuffer buf(Alloc::kCudaMalloc, 0, count * 4);
    for (int rep = 0; rep < repeats; ++rep)
      if (!allreduce_once(api, comm, stream, buf, count, rank, fail)) return;
  }
  (void)api->stream_destroy(stream);
  if (zcx_comm_destroy(comm) != ZCX_SUCCESS || zcx_finalize(ctx) != ZCX_SUCCESS)
    fail(std::string("teardown: ") + zcx_get_last_error());
}

struct Counts {
  int cuda_regs, provider_flushes;
  long gpu_flushes;
  int regs_left;  // registrations not deregistered by the end of the job
};

Counts run_job(FlushCounter gpu_flushes, int repeats = 1) {
  test::FakeStats& st = test::fake_stats();
  Counts before{st.cuda_registrations.load(), st.flushes.load(), gpu_flushes(),
                st.registrations.load() - st.deregistrations.load()};
  zcx_unique_id_t id{};
  {
    config::ScopedOverride lo("ZCX_SOCKET_IFNAME", "lo");
    EXPECT_EQ(zcx_get_unique_id(&id), ZCX_SUCCESS) << zcx_get_last_error();
  }
  std::atomic<int> failures{0};
  test::run_threads(kRanks, [&](int r) { allreduce_rank(r, id, repeats, &failures); });
  EXPECT_EQ(failures.load(), 0);
  return Counts{st.cuda_registrations.load() - before.cuda_regs,
                st.flushes.load() - before.provider_flushes, gpu_flushes() - before.gpu_flushes,
                st.registrations.load() - st.deregistrations.load() - before.regs_left};
}

class CollGpuDirect : public ::testing::Test {
 protected:
  void SetUp() override {
    ZCX_REQUIRE_GPUS(1);
    std::string why;
    ASSERT_NE(cuda_shim_load(&why), nullptr) << why;  // loads the runtime into this process
    flushes_ = fake_counter("fake_cuda_gdr_flushes");
    if (flushes_ == nullptr) {
      std::printf("[  SKIPPED ] fakegdr copies GPU memory with memcpy: this needs the "
                  "simulated CUDA runtime (ctest zcx_gpu_coll_gdr_simulated)\n");
      GTEST_SKIP() << "needs the simulated CUDA runtime";
    }
    use(test::fake_gdr_provider());
  }
  void TearDown() override { api_set_context_options(nullptr); }
  void use(const zcx_provider_ops_t* provider) {
    options_ = ContextOptions{{provider}, "gdr-host"};
    api_set_context_options(&options_);
  }

  ContextOptions options_;
  config::ScopedOverride timeout_{"ZCX_TIMEOUT", "20"};
  // Synchronous calls: the ranks here are threads of one process on one device, where a
  // call's allocation waits for every stream, the other ranks' held ones included (the
  // simulator models CUDA's device-wide waits), so asynchronous calls would wait for each
  // other until ZCX_TIMEOUT. Both modes hand transfers to the same executor.
  config::ScopedOverride sync_{"ZCX_GPU_ASYNC", "0"};
  FlushCounter flushes_ = nullptr;
};

TEST_F(CollGpuDirect, DeviceBuffersGoToTheProviderAndReceivesAreFlushed) {
  Counts c = run_job(flushes_);
  EXPECT_GT(c.cuda_regs, 0) << "no device buffer was registered as GPU memory: staged?";
  EXPECT_GT(c.provider_flushes, 0) << "receives into device memory were not flushed (iflush)";
  EXPECT_EQ(c.gpu_flushes, 0) << "the provider flushes: the GPU need not";
  EXPECT_EQ(c.regs_left, 0);
  // An operation registers each of its buffers once per connection (Context::hold_range),
  // not each chunk it moves: fewer registrations than there were receives alone.
  EXPECT_LT(c.cuda_regs, c.provider_flushes);
  std::printf("GPUDirect: %d CUDA registrations, %d provider flushes, %ld GPU flushes\n",
              c.cuda_regs, c.provider_flushes, c.gpu_flushes);
}

TEST_F(CollGpuDirect, WithoutAProviderFlushTheGpuIsFlushed) {
  use(test::fake_gdr_noflush_provider());
  Counts c = run_job(flushes_);
  EXPECT_GT(c.cuda_regs, 0) << "no device buffer was registered as GPU memory: staged?";
  EXPECT_EQ(c.provider_flushes, 0);
  EXPECT_GT(c.gpu_flushes, 0) << "no cudaDeviceFlushGPUDirectRDMAWrites after GPUDirect receives";
  std::printf("GPUDirect without iflush: %d CUDA registrations, %ld GPU flushes\n", c.cuda_regs,
              c.gpu_flushes);
}

// A registration lasts one operation (the executor's hold on its buffers): the same buffer
// used twice is registered twice, since CUDA may have given its address to another
// allocation in between.
TEST_F(CollGpuDirect, DeviceRegistrationsLastOneOperation) {
  const Counts once = run_job(flushes_, 1);
  const Counts twice = run_job(flushes_, 2);
  ASSERT_GT(once.cuda_regs, 0);
  EXPECT_EQ(twice.cuda_regs, 2 * once.cuda_regs);
  EXPECT_EQ(twice.provider_flushes, 2 * once.provider_flushes);
}

TEST_F(CollGpuDirect, ForcedStagingKeepsDeviceMemoryFromTheProvider) {
  config::ScopedOverride staging("ZCX_GPU_STAGING", "1");
  Counts c = run_job(flushes_);
  EXPECT_EQ(c.cuda_regs, 0);
  EXPECT_EQ(c.provider_flushes, 0);
  EXPECT_EQ(c.gpu_flushes, 0);
}

}  // namespace
}  // namespace zcx::gpu_test
