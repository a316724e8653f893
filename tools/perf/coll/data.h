// Deterministic test data for zcx-perf coll: what each rank puts into a collective and what
// it must get back, for every zcx dtype and reduction.
//
// Inputs are chosen so that results are exact whatever order the library reduces in:
//  - copies (broadcast, allgather, alltoall, sendrecv): a hash of (seed, rank, index), all
//    bits for integers, an integer below 2^(mantissa bits + 1) for floats; compared bit-exact;
//  - sum, min, max, avg: small integers in [0, L) with L = max(2, min(16, exact / nranks)),
//    where `exact` is the largest integer the dtype holds exactly, so no sum overflows;
//  - prod: 1 or 2 for integers (products wrap modulo 2^bits, which is order-free), 0.5, 1 or
//    2 for floats (powers of two).
// Integer results must be exact. Float results must be within nranks * epsilon(dtype) of the
// value computed in double and rounded to the dtype once (avg divides, and half/bfloat16
// reductions round each step through float32, which may differ by an ulp).
#pragma once

#include <zcx/coll.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace zcx::perf {

// 16-bit floats, stored as their bits.
struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even
float bhalf_to_float(uint16_t b);
uint16_t float_to_bhalf(float f);  // round to nearest even

template <class T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                          std::is_same_v<T, BHalf>;

template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BHalf>) return bhalf_to_float(v.bits);
  else return static_cast<double>(v);
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) return Half{float_to_half(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, BHalf>) return BHalf{float_to_bhalf(static_cast<float>(v))};
  else return static_cast<T>(v);
}

// Largest integer the type holds exactly (for floats 2^(mantissa bits + 1)).
template <class T>
double exact_integer_limit() {
  if constexpr (std::is_same_v<T, Half>) return 2048.0;
  else if constexpr (std::is_same_v<T, BHalf>) return 256.0;
  else if constexpr (std::is_floating_point_v<T>) return std::ldexp(1.0, std::numeric_limits<T>::digits);
  else return static_cast<double>(std::numeric_limits<T>::max());
}

template <class T>
double epsilon() {
  if constexpr (std::is_same_v<T, Half>) return std::ldexp(1.0, -10);
  else if constexpr (std::is_same_v<T, BHalf>) return std::ldexp(1.0, -7);
  else if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::epsilon();
  else return 0;
}

enum class PatternKind { kCopy, kSmall, kProd };

// Which values rank r holds at index j: value<T>(pattern, r, j).
struct Pattern {
  PatternKind kind = PatternKind::kCopy;
  uint64_t seed = 0;
  uint64_t small_limit = 16;  // kSmall: values in [0, small_limit)
};

inline uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
Pattern make_pattern(zcx_redop_t op, bool reduces, uint64_t seed, int nranks) {
  Pattern p;
  p.seed = seed;
  if (!reduces) return p;
  p.kind = op == ZCX_PROD ? PatternKind::kProd : PatternKind::kSmall;
  double per_rank = exact_integer_limit<T>() / nranks;
  p.small_limit = per_rank >= 16 ? 16 : per_rank >= 2 ? static_cast<uint64_t>(per_rank) : 2;
  return p;
}

template <class T>
T value(const Pattern& p, int rank, size_t j) {
  uint64_t h = mix(p.seed ^ mix(static_cast<uint64_t>(rank) * 0x100000001b3ull + j));
  if (p.kind == PatternKind::kSmall) return from_double<T>(static_cast<double>(h % p.small_limit));
  if (p.kind == PatternKind::kProd) {
    if constexpr (kIsFloat<T>) return from_double<T>((h % 3 == 0) ? 0.5 : (h % 3 == 1) ? 1.0 : 2.0);
    else return static_cast<T>(1 + (h & 1));
  }
  if constexpr (kIsFloat<T>) return from_double<T>(static_cast<double>(h % static_cast<uint64_t>(exact_integer_limit<T>())));
  else return static_cast<T>(h);
}

// The reduction over every rank of value(p, r, j), as the library must compute it.
template <class T>
T reduced(const Pattern& p, int nranks, size_t j, zcx_redop_t op) {
  if constexpr (kIsFloat<T>) {
    double acc = to_double(value<T>(p, 0, j));
    for (int r = 1; r < nranks; ++r) {
      double v = to_double(value<T>(p, r, j));
      acc = op == ZCX_PROD ? acc * v : op == ZCX_MIN ? std::fmin(acc, v)
          : op == ZCX_MAX ? std::fmax(acc, v) : acc + v;
    }
    return from_double<T>(op == ZCX_AVG ? acc / nranks : acc);
  } else {
    T acc = value<T>(p, 0, j);
    uint64_t wide = static_cast<uint64_t>(acc);  // sum and prod wrap, as the library's do
    for (int r = 1; r < nranks; ++r) {
      T v = value<T>(p, r, j);
      if (op == ZCX_MIN) acc = v < acc ? v : acc;
      else if (op == ZCX_MAX) acc = v > acc ? v : acc;
      else if (op == ZCX_PROD) wide *= static_cast<uint64_t>(v);
      else wide += static_cast<uint64_t>(v);
    }
    if (op == ZCX_MIN || op == ZCX_MAX) return acc;
    T folded = static_cast<T>(wide);
    if (op != ZCX_AVG) return folded;
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    return static_cast<T>(static_cast<Wide>(folded) / static_cast<Wide>(nranks));
  }
}

// Whether `got` is an acceptable result for `want` (see the header comment).
template <class T>
bool matches(T got, T want, int nranks) {
  if constexpr (kIsFloat<T>) {
    double g = to_double(got), w = to_double(want);
    if (g == w) return true;
    return std::isfinite(g) && std::fabs(g - w) <= nranks * epsilon<T>() * std::fabs(w);
  } else {
    return got == want;
  }
}

// Calls fn(T{}) with the storage type of dtype.
template <class Fn>
decltype(auto) with_dtype(zcx_dtype_t dtype, Fn&& fn) {
  switch (dtype) {
    case ZCX_INT8: return fn(int8_t{});
    case ZCX_UINT8: return fn(uint8_t{});
    case ZCX_INT32: return fn(int32_t{});
    case ZCX_UINT32: return fn(uint32_t{});
    case ZCX_INT64: return fn(int64_t{});
    case ZCX_UINT64: return fn(uint64_t{});
    case ZCX_FLOAT16: return fn(Half{});
    case ZCX_BFLOAT16: return fn(BHalf{});
    case ZCX_FLOAT32: return fn(float{});
    default: return fn(double{});
  }
}

}  // namespace zcx::perf
