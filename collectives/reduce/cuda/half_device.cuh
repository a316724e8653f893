// float16 / bfloat16 <-> float32 on the device: the same bit manipulation as
// collectives/reduce/half.h (round to nearest even, subnormals kept, NaN made quiet), so GPU
// results are bit-identical to the CPU reference. Not the CUDA intrinsics (__float2half_rn
// would agree on finite values but the promise is "the same expression", as on the CPU).
#pragma once

#include <stdint.h>

namespace zcx::coll::cuda {

__device__ __forceinline__ uint32_t shift_round_even(uint32_t mant, uint32_t shift) {
  uint32_t r = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return r;
}

__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f)
    return __uint_as_float(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
  if (exp != 0) return __uint_as_float(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return __uint_as_float(sign);
  uint32_t e = 113;  // subnormal half: mant * 2^-24, renormalised for float32
  while (!(mant & 0x400u)) {
    mant <<= 1;
    --e;
  }
  return __uint_as_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

__device__ __forceinline__ uint16_t f32_to_f16(float f) {
  uint32_t x = __float_as_uint(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax >= 0x38800000u)
    return static_cast<uint16_t>(sign | shift_round_even(ax - 0x38000000u, 13));
  if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);
  uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - (ax >> 23);
  return static_cast<uint16_t>(sign | shift_round_even(mant, shift));
}

__device__ __forceinline__ float bf16_to_f32(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace zcx::coll::cuda
