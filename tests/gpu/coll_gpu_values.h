// The values of the stream-ordered collectives tests (coll_gpu_test.cc): what each rank
// holds at each element, the exact reduced result, and their encoding in every dtype.
#pragma once

#include <zcx/coll.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "reduce/half.h"

namespace zcx::gpu_test {

inline uint32_t mix_hash(int rank, size_t i, uint32_t salt) {
  uint64_t x =
      (static_cast<uint64_t>(rank) << 40) ^ (i * 0x9e3779b97f4a7c15ull) ^ (salt * 0x100000001b3ull);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return static_cast<uint32_t>(x ^ (x >> 29));
}

// What rank `rank` (of n) holds at element i: small integers for the reductions (exact sums
// in bfloat16 with 4 ranks, averages exact since float64 inputs are multiples of n), every
// bit pattern for int32 (max and the copies).
inline double input(zcx_dtype_t d, int rank, int n, size_t i) {
  uint32_t h = mix_hash(rank, i, static_cast<uint32_t>(d));
  switch (d) {
    case ZCX_FLOAT32: return static_cast<int>(h % 1024) - 512;
    case ZCX_BFLOAT16: return static_cast<int>(h % 64) - 32;
    case ZCX_FLOAT16: return static_cast<int>(h % 512) - 256;
    case ZCX_FLOAT64: return n * (static_cast<int>(h % 2001) - 1000);
    case ZCX_UINT8: return h % 256;
    default: return static_cast<int32_t>(h);
  }
}

inline double reduced(zcx_dtype_t d, zcx_redop_t op, int n, size_t i) {
  double acc = input(d, 0, n, i);
  for (int r = 1; r < n; ++r) {
    double v = input(d, r, n, i);
    acc = op == ZCX_MIN ? std::min(acc, v) : op == ZCX_MAX ? std::max(acc, v) : acc + v;
  }
  return op == ZCX_AVG ? acc / n : acc;
}

template <class T>
inline void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void encode(zcx_dtype_t d, double v, uint8_t* p) {
  float f = static_cast<float>(v);
  switch (d) {
    case ZCX_FLOAT32: return store(p, f);
    case ZCX_FLOAT64: return store(p, v);
    case ZCX_BFLOAT16: return store(p, coll::f32_to_bf16(f));
    case ZCX_FLOAT16: return store(p, coll::f32_to_f16(f));
    case ZCX_UINT8: return store(p, static_cast<uint8_t>(v));
    default: return store(p, static_cast<int32_t>(v));
  }
}

inline double decode(zcx_dtype_t d, const uint8_t* p) {
  switch (d) {
    case ZCX_FLOAT32: return load<float>(p);
    case ZCX_FLOAT64: return load<double>(p);
    case ZCX_BFLOAT16: return coll::bf16_to_f32(load<uint16_t>(p));
    case ZCX_FLOAT16: return coll::f16_to_f32(load<uint16_t>(p));
    case ZCX_UINT8: return *p;
    default: return load<int32_t>(p);
  }
}

// count elements of rank `rank`'s input, starting at element `from`.
inline void put_input(zcx_dtype_t d, int rank, int n, size_t from, size_t count, uint8_t* out) {
  size_t es = zcx_dtype_size(d);
  for (size_t i = 0; i < count; ++i) encode(d, input(d, rank, n, from + i), out + i * es);
}

}  // namespace zcx::gpu_test
