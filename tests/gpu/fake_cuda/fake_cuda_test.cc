// The simulated CUDA runtime fails where a GPU would: a host read of a cudaMalloc range
// faults and a system call handed one fails with EFAULT, while the runtime's own copies still
// reach it (fake_cuda_access.cc); copies and memsets a GPU could not do are refused; a child
// forked after CUDA was initialised cannot use it. Without this, a simulated test could pass
// a zcx path that crashes on a GPU. Runs against the simulated runtime only (ctest entry
// zcx_fake_cuda_simulated).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../gpu_test_util.h"

namespace zcx::gpu_test {
namespace {

class SimulatedCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    api = cuda_shim_load(&why);
    ASSERT_NE(api, nullptr) << why;
    guarded = fake_counter("fake_cuda_device_guarded");
    ASSERT_NE(guarded, nullptr) << "the loaded CUDA runtime is not the simulated one";
  }
  const CudaApi* api = nullptr;
  FakeCounter guarded = nullptr;
};

TEST_F(SimulatedCuda, HostCodeCannotTouchDeviceMemory) {
  void* dev = nullptr;
  ASSERT_EQ(api->mem_alloc(&dev, 4096), cudaSuccess);
  if (guarded() == 0) {
    std::printf("[  SKIPPED ] no memory protection keys: device memory is open to host code\n");
    (void)api->mem_free(dev);
    GTEST_SKIP() << "no memory protection keys (pku) on this machine";
  }
  std::vector<uint8_t> in(4096), out(4096);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
  EXPECT_EQ(api->copy(dev, in.data(), in.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(api->copy(out.data(), dev, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(in, out) << "the runtime's own copies reach device memory";

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  errno = 0;
  EXPECT_EQ(write(fds[1], dev, 16), -1) << "a system call read device memory";
  EXPECT_EQ(errno, EFAULT);
  close(fds[0]);
  close(fds[1]);

  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto* byte = static_cast<volatile uint8_t*>(dev);
  EXPECT_DEATH((void)byte[0], "") << "a host read of device memory";
  EXPECT_DEATH(byte[100] = 1, "") << "a host write to device memory";
  EXPECT_EQ(api->mem_free(dev), cudaSuccess);
}

// A GPU leaves a copy whose kind contradicts its pointers undefined, and a memset or kernel
// on pageable host memory faults: the simulator refuses both rather than doing them anyway.
TEST_F(SimulatedCuda, CopiesAndMemsetsTheDeviceCouldNotDoAreRefused) {
  void* dev = nullptr;
  ASSERT_EQ(api->mem_alloc(&dev, 256), cudaSuccess);
  std::vector<uint8_t> host(8192);
  EXPECT_EQ(api->copy(dev, host.data(), 256, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(api->copy(dev, host.data(), 256, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(api->copy(host.data(), dev, 256, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(api->copy(dev, host.data(), 8192, cudaMemcpyDefault), cudaErrorInvalidValue)
      << "8 KiB into a 256-byte allocation (a page, as the simulator rounds it)";
  EXPECT_EQ(api->set_async(host.data(), 0, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(api->set_async(dev, 0, 256, nullptr), cudaSuccess);
  EXPECT_EQ(api->mem_free(dev), cudaSuccess);
}

// CUDA does not survive fork: the child of a process that initialised it gets an
// initialisation error, here as on a GPU, so a test that forks its ranks too late fails.
TEST_F(SimulatedCuda, AChildForkedAfterInitialisationCannotUseCuda) {
  int n = 0;
  ASSERT_EQ(api->get_device_count(&n), cudaSuccess);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    void* p = nullptr;
    _exit(api->mem_alloc(&p, 64) == cudaErrorInitializationError ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the forked child's cudaMalloc did not fail with cudaErrorInitializationError";
  void* p = nullptr;
  EXPECT_EQ(api->mem_alloc(&p, 64), cudaSuccess) << "the parent still can";
  EXPECT_EQ(api->mem_free(p), cudaSuccess);
}

// Virtual memory management as the cuda_ipc provider uses it: a reference per handle and
// per mapping, exports only for the POSIX-fd handle type, imports only of the simulator's
// own allocations, one allocation seen through two mappings, and host code shut out.
TEST_F(SimulatedCuda, VmmCountsReferencesAndSharesThroughFds) {
  FakeCounter refs = fake_counter("fake_cuda_vmm_references");
  ASSERT_NE(refs, nullptr);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  size_t gran = 0;
  ASSERT_EQ(api->cu_mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  EXPECT_EQ(gran, size_t{2} << 20);
  CUmemGenericAllocationHandle closed{}, h{}, imported{};
  EXPECT_EQ(api->cu_mem_create(&h, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api->cu_mem_create(&closed, gran, &prop, 0), CUDA_SUCCESS);
  int fd = -1;
  constexpr auto kFd = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  EXPECT_NE(api->cu_mem_export_to_shareable_handle(&fd, closed, kFd, 0), CUDA_SUCCESS)
      << "made without the type";
  EXPECT_EQ(api->cu_mem_release(closed), CUDA_SUCCESS);
  prop.requestedHandleTypes = kFd;
  const long before = refs();
  ASSERT_EQ(api->cu_mem_create(&h, gran, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(api->cu_mem_export_to_shareable_handle(&fd, h, kFd, 0), CUDA_SUCCESS);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_EQ(api->cu_mem_import_from_shareable_handle(
                &imported, reinterpret_cast<void*>(static_cast<intptr_t>(fds[0])), kFd),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api->cu_mem_import_from_shareable_handle(
                &imported, reinterpret_cast<void*>(static_cast<intptr_t>(fd)), kFd),
            CUDA_SUCCESS);
  for (int f : {fd, fds[0], fds[1]}) close(f);
  CUdeviceptr a = 0, b = 0;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (auto [at, handle] : {std::pair{&a, h}, std::pair{&b, imported}}) {
    ASSERT_EQ(api->cu_mem_address_reserve(at, gran, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(api->cu_mem_map(*at, gran, 0, handle, 0), CUDA_SUCCESS);
    ASSERT_EQ(api->cu_mem_set_access(*at, gran, &access, 1), CUDA_SUCCESS);
    EXPECT_EQ(api->cu_mem_release(handle), CUDA_SUCCESS) << "the mapping keeps it";
  }
  EXPECT_EQ(refs() - before, 2) << "one reference per mapping is left";
  std::vector<uint8_t> in(4096, 0x5a), out(4096, 0);
  EXPECT_EQ(api->copy(reinterpret_cast<void*>(a), in.data(), in.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(api->copy(out.data(), reinterpret_cast<void*>(b), out.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(in, out) << "the import maps the same memory";
  if (guarded() != 0) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH((void)*reinterpret_cast<volatile uint8_t*>(b), "") << "a host read";
  }
  for (CUdeviceptr at : {a, b}) {
    EXPECT_EQ(api->cu_mem_unmap(at, gran), CUDA_SUCCESS);
    EXPECT_EQ(api->cu_mem_address_free(at, gran), CUDA_SUCCESS);
  }
  EXPECT_EQ(refs(), before) << "every reference went with its release or unmap";
  EXPECT_EQ(api->cu_mem_release(h), CUDA_ERROR_INVALID_VALUE) << "released twice";
}

}  // namespace
}  // namespace zcx::gpu_test
