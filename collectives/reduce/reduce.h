// CPU reduction kernels: out[i] = a[i] (op) b[i] for every dtype x op, with run-time SIMD
// dispatch (AVX-512, AVX2+F16C, scalar). Every SIMD path is bit-identical to the scalar
// reference (tests/collectives/reduce): integers wrap (two's complement), min/max are
// (a < b ? a : b) / (a > b ? a : b), float16/bfloat16 are widened to float32, combined, and
// rounded to nearest even after each binary operation. NaN results are NaN on every path
// (payloads may differ). avg reduces as sum; finalize_avg divides by nranks at the end
// (integers truncate toward zero).
#pragma once

#include <zcx/coll.h>

#include <cstddef>

namespace zcx::coll {

// zcx_dtype_size without the call (every small collective asks several times).
inline size_t dtype_bytes(zcx_dtype_t dtype) {
  constexpr size_t kSizes[ZCX_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  return dtype >= 0 && dtype < ZCX_DTYPE_COUNT ? kSizes[dtype] : 0;
}

enum class SimdLevel : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
const char* simd_level_name(SimdLevel level);

// out may alias a or b exactly (in place); other overlaps are not allowed.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

// Best level this CPU supports, capped by ZCX_COLL_SIMD (auto|scalar|avx2|avx512).
SimdLevel simd_level();
bool simd_supported(SimdLevel level);
// The kernel for (dtype, op) at `level` (falls back to a lower level where a kernel is
// missing: e.g. int8 prod has no AVX-512 form). nullptr for an invalid dtype/op.
ReduceFn reduce_fn(zcx_dtype_t dtype, zcx_redop_t op, SimdLevel level);
// The scalar reference (tests compare against it).
ReduceFn reduce_fn_scalar(zcx_dtype_t dtype, zcx_redop_t op);
// Dispatched at simd_level().
void reduce(zcx_dtype_t dtype, zcx_redop_t op, void* out, const void* a, const void* b,
            size_t n);
// buf[i] /= nranks, the last step of avg.
void finalize_avg(zcx_dtype_t dtype, void* buf, size_t n, int nranks);

// Per-level kernel tables: [dtype][op] for op in sum, prod, min, max; nullptr = none.
using KernelTable = ReduceFn[ZCX_DTYPE_COUNT][4];
void fill_scalar_kernels(KernelTable& t);
void fill_avx2_kernels(KernelTable& t);
void fill_avx512_kernels(KernelTable& t);

}  // namespace zcx::coll
