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

}  // namespace
}  // namespace zcx::gpu_test
