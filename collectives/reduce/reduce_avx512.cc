// AVX-512 (F, BW, DQ, VL) kernels, compiled for that target only inside this file. float16
// uses the AVX-512 forms of the F16C conversions. bfloat16 rounds with integer vector ops
// rather than VCVTNEPS2BF16, because that instruction flushes subnormal inputs to zero
// (seen on a Sapphire-Rapids-class CPU: 0x00012345 -> 0x0000, reference 0x0001) and so
// could not match the reference (or the AVX2 path) bit for bit.
#include "reduce/reduce.h"
#include "reduce/reduce_elem.h"

#include <immintrin.h>

#include <cstring>

#pragma GCC push_options
// The intrinsic headers leave "undefined" vector operands that -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c,fma")

namespace zcx::coll {
namespace {

#define ZCX_VB 64
typedef float VecF16 __attribute__((vector_size(64)));

inline VecF16 half_load(const uint16_t* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return (VecF16)(_mm512_cvtph_ps(h));
}
inline void half_store(uint16_t* p, VecF16 f) {
  __m256i h = _mm512_cvtps_ph((__m512)f, _MM_FROUND_TO_NEAREST_INT);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
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

void fill_avx512_kernels(KernelTable& t) { fill_vec_table(t); }

}  // namespace zcx::coll
