// Element-wise reduction operators shared by the scalar reference and the SIMD tails, so
// that every path computes each element with the very same expression.
#pragma once

#include "reduce/half.h"

#include <cstdint>
#include <type_traits>

namespace zcx::coll {

// Integer sum/prod run on the unsigned type (defined wrap-around); min/max on the signed one.
template <class T, bool kInt = std::is_integral_v<T>>
struct Wrap { using type = T; };
template <class T>
struct Wrap<T, true> { using type = std::make_unsigned_t<T>; };
template <class T>
using WrapType = typename Wrap<T>::type;

struct SumOp {
  template <class T> static T apply(T a, T b) { return static_cast<T>(a + b); }
};
struct ProdOp {
  template <class T> static T apply(T a, T b) { return static_cast<T>(a * b); }
};
struct MinOp {
  template <class T> static T apply(T a, T b) { return a < b ? a : b; }
};
struct MaxOp {
  template <class T> static T apply(T a, T b) { return a > b ? a : b; }
};

// The element type an operator computes in, for storage type T.
template <class Op, class T>
using CalcType = std::conditional_t<std::is_same_v<Op, SumOp> || std::is_same_v<Op, ProdOp>,
                                    WrapType<T>, T>;

// Tags for the 16-bit float formats (stored as uint16_t).
struct Half {};
struct BHalf {};

template <class Op>
inline uint16_t half_apply(uint16_t a, uint16_t b) {
  return f32_to_f16(Op::apply(f16_to_f32(a), f16_to_f32(b)));
}
template <class Op>
inline uint16_t bhalf_apply(uint16_t a, uint16_t b) {
  return f32_to_bf16(Op::apply(bf16_to_f32(a), bf16_to_f32(b)));
}

// Scalar loops (the reference, and the tails of the SIMD kernels).
template <class Op, class T>
inline void scalar_loop(T* out, const T* a, const T* b, size_t n) {
  using C = CalcType<Op, T>;
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(Op::apply(static_cast<C>(a[i]), static_cast<C>(b[i])));
}
template <class Op>
inline void scalar_loop_half(uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = half_apply<Op>(a[i], b[i]);
}
template <class Op>
inline void scalar_loop_bhalf(uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bhalf_apply<Op>(a[i], b[i]);
}

}  // namespace zcx::coll
