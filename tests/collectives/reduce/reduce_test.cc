// Every dtype x op x SIMD level against the scalar reference, bit for bit: odd lengths,
// unaligned pointers, in place, random bit patterns (subnormals, infinities, NaNs).
#include "reduce/half.h"
#include "reduce/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

namespace zcx::coll {

// What gtest prints for a level (and ctest's test names carry), rather than its bytes; in
// SimdLevel's own namespace, where gtest looks.
void PrintTo(SimdLevel level, std::ostream* os) { *os << simd_level_name(level); }

namespace {

const size_t kLengths[] = {0, 1, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 4099};

bool is_nan_bits(zcx_dtype_t dt, const uint8_t* p) {
  if (dt == ZCX_FLOAT16) { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7fff) > 0x7c00; }
  if (dt == ZCX_BFLOAT16) { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7fff) > 0x7f80; }
  if (dt == ZCX_FLOAT32) { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
  if (dt == ZCX_FLOAT64) { double f; std::memcpy(&f, p, 8); return std::isnan(f); }
  return false;
}

// Bit-exact, except that two NaNs compare equal (payloads are not promised).
::testing::AssertionResult same(zcx_dtype_t dt, const uint8_t* want, const uint8_t* got,
                                size_t n) {
  size_t es = zcx_dtype_size(dt);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* w = want + i * es;
    const uint8_t* g = got + i * es;
    if (std::memcmp(w, g, es) == 0) continue;
    if (is_nan_bits(dt, w) && is_nan_bits(dt, g)) continue;
    uint64_t wv = 0, gv = 0;
    std::memcpy(&wv, w, es);
    std::memcpy(&gv, g, es);
    return ::testing::AssertionFailure() << "element " << i << " of " << n << ": want 0x"
                                         << std::hex << wv << " got 0x" << gv;
  }
  return ::testing::AssertionSuccess();
}

// Random bytes, but one element in four drawn from "ordinary" values so that sums and
// products also exercise normal rounding rather than mostly NaN/inf.
void fill(zcx_dtype_t dt, uint8_t* p, size_t n, std::mt19937_64& rng) {
  size_t es = zcx_dtype_size(dt);
  for (size_t i = 0; i < n * es; ++i) p[i] = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < n; i += 4) {
    float f = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 7.0f;
    if (dt == ZCX_FLOAT16) { uint16_t h = f32_to_f16(f); std::memcpy(p + i * es, &h, 2); }
    if (dt == ZCX_BFLOAT16) { uint16_t h = f32_to_bf16(f); std::memcpy(p + i * es, &h, 2); }
    if (dt == ZCX_FLOAT32) std::memcpy(p + i * es, &f, 4);
    if (dt == ZCX_FLOAT64) { double d = f; std::memcpy(p + i * es, &d, 8); }
  }
}

struct Case { zcx_dtype_t dt; zcx_redop_t op; SimdLevel level; };

void check_case(const Case& c, size_t n, size_t misalign, std::mt19937_64& rng) {
  size_t es = zcx_dtype_size(c.dt), bytes = n * es + 64;
  std::vector<uint8_t> a(bytes), b(bytes), want(bytes), got(bytes);
  uint8_t* pa = a.data() + misalign;
  uint8_t* pb = b.data() + (misalign * 3) % 7;
  uint8_t* pg = got.data() + (misalign * 5) % 11;
  fill(c.dt, pa, n, rng);
  fill(c.dt, pb, n, rng);
  reduce_fn_scalar(c.dt, c.op)(want.data(), pa, pb, n);
  reduce_fn(c.dt, c.op, c.level)(pg, pa, pb, n);
  ASSERT_TRUE(same(c.dt, want.data(), pg, n)) << "out of place, misalign " << misalign;
  std::memcpy(pg, pa, n * es);  // in place: out aliases the first input
  reduce_fn(c.dt, c.op, c.level)(pg, pg, pb, n);
  ASSERT_TRUE(same(c.dt, want.data(), pg, n)) << "in place, misalign " << misalign;
}

class ReduceTest : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(ReduceTest, MatchesScalarReferenceBitExact) {
  SimdLevel level = GetParam();
  if (!simd_supported(level)) GTEST_SKIP() << "this CPU lacks " << simd_level_name(level);
  std::mt19937_64 rng(42);
  for (int dt = 0; dt < ZCX_DTYPE_COUNT; ++dt)
    for (int op = 0; op < ZCX_REDOP_COUNT; ++op)
      for (size_t n : kLengths)
        for (size_t mis : {0, 1, 3}) {
          SCOPED_TRACE(std::string(zcx_dtype_name(static_cast<zcx_dtype_t>(dt))) + " " +
                       zcx_redop_name(static_cast<zcx_redop_t>(op)) + " n=" +
                       std::to_string(n));
          check_case({static_cast<zcx_dtype_t>(dt), static_cast<zcx_redop_t>(op), level}, n,
                     mis, rng);
          if (HasFatalFailure()) return;
        }
}

INSTANTIATE_TEST_SUITE_P(Levels, ReduceTest,
                         ::testing::Values(SimdLevel::kScalar, SimdLevel::kAvx2,
                                           SimdLevel::kAvx512),
                         [](const auto& info) { return simd_level_name(info.param); });

// The reference itself: known float16/bfloat16 roundings.
TEST(HalfTest, Float16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                   // tie rounds to even: inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);      // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);      // tie to even: zero
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even stays
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every non-NaN half survives a round trip
    if ((h & 0x7fff) > 0x7c00) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(HalfTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00012345)), 0x0001);  // subnormals kept
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7f7fffff)), 0x7f80);  // overflow to inf
}

TEST(AvgTest, DividesAtTheEndAndTruncatesIntegers) {
  int32_t i[3] = {7, -7, 9};
  finalize_avg(ZCX_INT32, i, 3, 2);
  EXPECT_EQ(i[0], 3);
  EXPECT_EQ(i[1], -3);
  EXPECT_EQ(i[2], 4);
  uint16_t h = f32_to_f16(3.0f);
  finalize_avg(ZCX_FLOAT16, &h, 1, 2);
  EXPECT_EQ(h, f32_to_f16(1.5f));
}

}  // namespace
}  // namespace zcx::coll
