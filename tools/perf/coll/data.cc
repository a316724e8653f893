#include "coll/data.h"

namespace zcx::perf {
namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf, nan
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24.
  float magnitude = std::ldexp(static_cast<float>(mant), -24);
  return sign ? -magnitude : magnitude;
}

uint16_t float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  float a = std::fabs(f);
  if (std::isnan(a)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal: the nearest multiple of 2^-24 (nearbyint rounds half to even).
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24))));
  }
  uint32_t bits = float_bits(a);
  uint32_t rounded = bits + 0xfffu + ((bits >> 13) & 1u);  // round the 13 dropped bits to even
  uint32_t exp = (rounded >> 23) - 112, mant = (rounded >> 13) & 0x3ffu;
  return static_cast<uint16_t>(sign | (exp << 10) | mant);
}

float bhalf_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bhalf(float f) {
  uint32_t u = float_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace zcx::perf
