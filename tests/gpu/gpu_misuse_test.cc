// Device buffers handed to calls that take host memory: zcx_isend, zcx_irecv and
// zcx_mem_register, and a collective or send/recv without a CUDA stream. The providers and
// the host schedules copy those buffers with the CPU, which faults on device memory; each
// call must fail with ZCX_ERR_INVALID_ARG saying the buffer is GPU memory, and the same
// collective with a stream must still work afterwards. A stream-ordered call's buffer must
// lie in device memory that holds all of it. One rank, one process (no fork after
// CUDA is initialised). Runs on a GPU (label gpu) and against the simulated runtime, whose
// device memory faults on host access as a GPU's does (zcx_gpu_misuse_simulated).
#include <gtest/gtest.h>
#include <zcx/coll.h>
#include <zcx/zcx.h>

#include <string>
#include <vector>

#include "cuda_ipc_util.h"
#include "gpu_test_util.h"

namespace zcx::gpu_test {
namespace {

bool says_gpu_memory() {
  return std::string(zcx_get_last_error()).find("is GPU memory") != std::string::npos;
}

class GpuMisuse : public ::testing::Test {
 protected:
  void SetUp() override {
    ZCX_REQUIRE_GPUS(1);
    std::string why;
    api = cuda_shim_load(&why);
    ASSERT_NE(api, nullptr) << why;
    ASSERT_EQ(api->set_device(0), cudaSuccess);
    zcx_unique_id_t id;
    ASSERT_EQ(zcx_get_unique_id(&id), ZCX_SUCCESS) << zcx_get_last_error();
    ASSERT_EQ(zcx_comm_init_rank(&comm, 1, &id, 0, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
  }
  void TearDown() override {
    if (comm != nullptr) {
      EXPECT_EQ(zcx_comm_destroy(comm), ZCX_SUCCESS) << zcx_get_last_error();
    }
  }
  const CudaApi* api = nullptr;
  zcx_comm_t comm = nullptr;
};

TEST_F(GpuMisuse, PointToPointCallsRefuseDeviceBuffers) {
  zcx_unique_id_t id;
  ASSERT_EQ(zcx_get_unique_id(&id), ZCX_SUCCESS);
  zcx_context_t ctx = nullptr;
  ASSERT_EQ(zcx_init_rank(&ctx, 1, &id, 0), ZCX_SUCCESS) << zcx_get_last_error();
  zcx_endpoint_t ep = nullptr;
  ASSERT_EQ(zcx_endpoint_get(ctx, 0, &ep), ZCX_SUCCESS) << zcx_get_last_error();
  DeviceBuffer dev(Alloc::kCudaMalloc, 0, 4096);
  ASSERT_TRUE(dev.ok());
  zcx_request_t req = nullptr;
  EXPECT_EQ(zcx_isend(ep, dev.data(), 4096, &req), ZCX_ERR_INVALID_ARG);
  EXPECT_TRUE(says_gpu_memory()) << zcx_get_last_error();
  EXPECT_EQ(zcx_irecv(ep, dev.data() + 64, 64, &req), ZCX_ERR_INVALID_ARG);
  EXPECT_TRUE(says_gpu_memory()) << zcx_get_last_error();
  zcx_memreg_t reg = nullptr;
  EXPECT_EQ(zcx_mem_register(ctx, dev.data(), 4096, &reg), ZCX_ERR_INVALID_ARG);
  EXPECT_TRUE(says_gpu_memory()) << zcx_get_last_error();
  char host[8] = "host";  // host memory still goes: a self-send
  ASSERT_EQ(zcx_isend(ep, host, sizeof host, &req), ZCX_SUCCESS) << zcx_get_last_error();
  char got[8] = {};
  EXPECT_EQ(zcx_recv(ep, got, sizeof got, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
  EXPECT_EQ(zcx_wait(req, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
  EXPECT_STREQ(got, "host");
  EXPECT_EQ(zcx_finalize(ctx), ZCX_SUCCESS) << zcx_get_last_error();
}

TEST_F(GpuMisuse, CallsWithoutAStreamRefuseDeviceBuffersAndWithOneRun) {
  constexpr size_t kCount = 256;
  DeviceBuffer dev(Alloc::kCudaMalloc, 0, kCount * 4);
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(zcx_allreduce(dev.data(), dev.data(), kCount, ZCX_INT32, ZCX_SUM, comm, nullptr),
            ZCX_ERR_INVALID_ARG);
  EXPECT_TRUE(says_gpu_memory()) << zcx_get_last_error();
  EXPECT_EQ(zcx_broadcast(dev.data(), dev.data(), kCount, ZCX_INT32, 0, comm, nullptr),
            ZCX_ERR_INVALID_ARG);
  EXPECT_TRUE(says_gpu_memory()) << zcx_get_last_error();
  std::vector<int32_t> host(kCount, 7);
  ASSERT_EQ(api->copy(dev.data(), host.data(), kCount * 4, cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(api->stream_create_with_flags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(zcx_allreduce(dev.data(), dev.data(), kCount, ZCX_INT32, ZCX_SUM, comm, stream),
            ZCX_SUCCESS) << zcx_get_last_error();
  EXPECT_EQ(api->stream_synchronize(stream), cudaSuccess);
  std::vector<int32_t> out(kCount, 0);
  ASSERT_EQ(api->copy(out.data(), dev.data(), kCount * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, host) << "one rank's allreduce leaves its values";
  EXPECT_EQ(api->stream_destroy(stream), cudaSuccess);
}

// A stream-ordered call whose buffer runs past the end of its cudaMalloc allocation is
// refused before anything is enqueued; one over cuMem allocations mapped back to back
// (expandable segments) is one buffer, and runs.
TEST_F(GpuMisuse, BuffersPastTheirAllocationAreRefusedUnlessSegmentsContinueThem) {
  constexpr size_t kCount = 1024;
  DeviceBuffer small(Alloc::kCudaMalloc, 0, kCount * 4);
  DeviceBuffer segments(Alloc::kVmmSegments, 0, size_t{6} << 20);
  ASSERT_TRUE(small.ok() && segments.ok());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(api->stream_create_with_flags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // 64 MiB from a 4 KiB allocation: past it whatever the driver rounds an allocation to.
  const size_t past = size_t{16} << 20;
  EXPECT_EQ(zcx_allreduce(small.data(), small.data(), past, ZCX_INT32, ZCX_SUM, comm, stream),
            ZCX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(zcx_get_last_error()).find("past the end of its allocation"),
            std::string::npos) << zcx_get_last_error();
  // 4 MiB from 1 MiB into the first 2 MiB segment: over three of them.
  const size_t count = (size_t{4} << 20) / 4;
  std::vector<int32_t> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<int32_t>(i);
  uint8_t* at = segments.data() + (size_t{1} << 20);
  ASSERT_EQ(api->copy(at, host.data(), count * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(zcx_allreduce(at, at, count, ZCX_INT32, ZCX_SUM, comm, stream), ZCX_SUCCESS)
      << zcx_get_last_error();
  EXPECT_EQ(api->stream_synchronize(stream), cudaSuccess);
  std::vector<int32_t> out(count, -1);
  ASSERT_EQ(api->copy(out.data(), at, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, host);
  EXPECT_EQ(api->stream_destroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace zcx::gpu_test
