// The GPU reduction kernels against the CPU scalar reference, for every dtype x op (avg
// included, finalised for 3 ranks): results must be bit-identical, except that a NaN may
// carry another payload (the CPU kernels make the same exception between SIMD levels).
// Inputs mix random bit patterns with special values (zeros of both signs, infinities,
// NaNs, subnormals, extremes) and an odd length so the grid-stride tail is covered.
#include "gpu_test_util.h"
#include "reduce/cuda/reduce_cuda.h"
#include "reduce/half.h"
#include "reduce/reduce.h"

#include <cmath>
#include <random>
#include <vector>

namespace zcx::gpu_test {
namespace {

constexpr size_t kCount = 100003;

bool is_nan(zcx_dtype_t d, const uint8_t* p) {
  uint16_t h;
  switch (d) {
    case ZCX_FLOAT16: std::memcpy(&h, p, 2); return std::isnan(coll::f16_to_f32(h));
    case ZCX_BFLOAT16: std::memcpy(&h, p, 2); return std::isnan(coll::bf16_to_f32(h));
    case ZCX_FLOAT32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case ZCX_FLOAT64: { double f; std::memcpy(&f, p, 8); return std::isnan(f); }
    default: return false;
  }
}

// Random bytes with every 7th element replaced by a special value of the type.
std::vector<uint8_t> make_input(zcx_dtype_t d, uint32_t seed) {
  size_t es = zcx_dtype_size(d);
  std::vector<uint8_t> v(kCount * es);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  static const uint16_t h16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x7bff, 0x3c00};
  static const uint16_t b16[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x7f7f, 0x3f80};
  static const float f32[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3.4e38f, 1.0f};
  static const double f64[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 5e-324, 1.7e308, 1.0};
  for (size_t i = 0; i < kCount; i += 7) {
    uint8_t* p = v.data() + i * es;
    size_t k = (i / 7 + seed) % 8;
    if (d == ZCX_FLOAT16) std::memcpy(p, &h16[k], 2);
    if (d == ZCX_BFLOAT16) std::memcpy(p, &b16[k], 2);
    if (d == ZCX_FLOAT32) std::memcpy(p, &f32[k], 4);
    if (d == ZCX_FLOAT64) std::memcpy(p, &f64[k], 8);
  }
  return v;
}

std::vector<uint8_t> cpu_result(zcx_dtype_t d, zcx_redop_t op, const std::vector<uint8_t>& a,
                                const std::vector<uint8_t>& b) {
  std::vector<uint8_t> out(a.size());
  coll::reduce_fn_scalar(d, op)(out.data(), a.data(), b.data(), kCount);
  if (op == ZCX_AVG) coll::finalize_avg(d, out.data(), kCount, 3);
  return out;
}

class DeviceBuffers {
 public:
  explicit DeviceBuffers(size_t bytes) : api_(cuda_shim()), bytes_(bytes) {
    for (void*& p : p_)
      if (api_->mem_alloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~DeviceBuffers() {
    for (void* p : p_)
      if (p != nullptr) (void)api_->mem_free(p);
  }
  bool ok() const { return p_[0] && p_[1] && p_[2]; }
  void* at(int i) const { return p_[i]; }

 private:
  const CudaApi* api_;
  size_t bytes_;
  void* p_[3] = {};
};

std::vector<uint8_t> gpu_result(zcx_dtype_t d, zcx_redop_t op, const std::vector<uint8_t>& a,
                                const std::vector<uint8_t>& b) {
  const CudaApi* api = cuda_shim();
  DeviceBuffers buf(a.size());
  EXPECT_TRUE(buf.ok()) << "cudaMalloc of " << a.size() << " bytes failed";
  std::vector<uint8_t> out(a.size());
  if (!buf.ok()) return out;
  EXPECT_EQ(cudaSuccess, api->copy(buf.at(0), a.data(), a.size(), cudaMemcpyHostToDevice));
  EXPECT_EQ(cudaSuccess, api->copy(buf.at(1), b.data(), b.size(), cudaMemcpyHostToDevice));
  EXPECT_EQ(Status::kSuccess,
            coll::cuda::reduce_async(d, op, buf.at(2), buf.at(0), buf.at(1), kCount, nullptr))
      << last_error();
  if (op == ZCX_AVG) {
    EXPECT_EQ(Status::kSuccess, coll::cuda::finalize_avg_async(d, buf.at(2), kCount, 3, nullptr))
        << last_error();
  }
  EXPECT_EQ(cudaSuccess, api->device_synchronize());
  EXPECT_EQ(cudaSuccess, api->copy(out.data(), buf.at(2), out.size(), cudaMemcpyDeviceToHost));
  return out;
}

class ReduceCudaTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    ZCX_REQUIRE_GPUS(1);
    std::string why;  // the probe loaded CUDA in a child; this process loads it now
    ASSERT_NE(cuda_shim_load(&why), nullptr) << why;
    ASSERT_EQ(cudaSuccess, cuda_shim()->set_device(0));
  }
};

TEST_P(ReduceCudaTest, BitIdenticalToCpuReference) {
  auto d = static_cast<zcx_dtype_t>(std::get<0>(GetParam()));
  auto op = static_cast<zcx_redop_t>(std::get<1>(GetParam()));
  std::vector<uint8_t> a = make_input(d, 1), b = make_input(d, 2);
  std::vector<uint8_t> want = cpu_result(d, op, a, b), got = gpu_result(d, op, a, b);
  size_t es = zcx_dtype_size(d), bad = 0;
  for (size_t i = 0; i < kCount && bad < 5; ++i) {
    const uint8_t* w = want.data() + i * es;
    const uint8_t* g = got.data() + i * es;
    if (std::memcmp(w, g, es) == 0 || (is_nan(d, w) && is_nan(d, g))) continue;
    ++bad;
    ADD_FAILURE() << zcx_dtype_name(d) << " " << zcx_redop_name(op) << ": element " << i
                  << " differs from the CPU reference";
  }
}

TEST_F(ReduceCudaTest, RejectsMisalignedAndInvalid) {
  DeviceBuffers buf(64);
  ASSERT_TRUE(buf.ok());
  auto* odd = static_cast<uint8_t*>(buf.at(0)) + 1;
  EXPECT_EQ(Status::kInvalidArg,
            coll::cuda::reduce_async(ZCX_FLOAT32, ZCX_SUM, odd, buf.at(1), buf.at(2), 4, nullptr));
  EXPECT_EQ(Status::kInvalidArg,
            coll::cuda::reduce_async(static_cast<zcx_dtype_t>(99), ZCX_SUM, buf.at(0), buf.at(1),
                                     buf.at(2), 4, nullptr));
  EXPECT_EQ(Status::kInvalidArg,
            coll::cuda::finalize_avg_async(ZCX_INT32, buf.at(0), 4, 0, nullptr));
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceCudaTest,
                         ::testing::Combine(::testing::Range(0, int(ZCX_DTYPE_COUNT)),
                                            ::testing::Range(0, int(ZCX_REDOP_COUNT))),
                         [](const auto& info) {
                           return std::string(zcx_dtype_name(static_cast<zcx_dtype_t>(
                                      std::get<0>(info.param)))) + "_" +
                                  zcx_redop_name(static_cast<zcx_redop_t>(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace zcx::gpu_test
