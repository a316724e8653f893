// float16 / bfloat16 <-> float32, bit-exact with the x86 hardware conversions the SIMD
// kernels use (F16C vcvtps2ph with round-to-nearest-even, and the integer bfloat16
// rounding in reduce_vec.h). Subnormals are kept (no flush to zero). NaNs stay NaN and are
// made quiet; NaN payloads are not part of the bit-exactness promise.
#pragma once

#include <cstdint>
#include <cstring>

namespace zcx::coll {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Shifts `mant` right by `shift` bits, rounding to nearest, ties to even.
inline uint32_t shift_round_even(uint32_t mant, uint32_t shift) {
  uint32_t r = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return r;
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
  if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);
  // Subnormal half: mant * 2^-24, renormalised for float32.
  uint32_t e = 113;
  while (!(mant & 0x400u)) {
    mant <<= 1;
    --e;
  }
  return f32_from_bits(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

inline uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536: inf
  if (ax >= 0x38800000u)  // normal half (rounding may carry into the exponent, or to inf)
    return static_cast<uint16_t>(sign | shift_round_even(ax - 0x38000000u, 13));
  if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: ties to zero
  uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - (ax >> 23);  // subnormal half: units of 2^-24
  return static_cast<uint16_t>(sign | shift_round_even(mant, shift));
}

inline float bf16_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace zcx::coll
