// AVX2 + F16C kernels, compiled for that target only inside this file (no global -mavx2);
// used when __builtin_cpu_supports says the CPU has both.
#include "reduce/reduce.h"
#include "reduce/reduce_elem.h"

#include <immintrin.h>

#include <cstring>

#pragma GCC push_options
// The intrinsic headers leave "undefined" vector operands that -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,f16c,fma")

namespace zcx::coll {
namespace {

#define ZCX_VB 32
typedef float VecF8 __attribute__((vector_size(32)));

inline VecF8 half_load(const uint16_t* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return (VecF8)(_mm256_cvtph_ps(h));
}
inline void half_store(uint16_t* p, VecF8 f) {
  __m128i h = _mm256_cvtps_ph((__m256)f, _MM_FROUND_TO_NEAREST_INT);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
}

#include "reduce/reduce_vec.h"
#undef ZCX_VB

}  // namespace
}  // namespace zcx::coll

#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace zcx::coll {
namespace {
#include "reduce/reduce_vec_table.h"
}  // namespace

void fill_avx2_kernels(KernelTable& t) { fill_vec_table(t); }

}  // namespace zcx::coll
