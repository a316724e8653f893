// Element-wise reduction operators shared by the scalar reference and the SIMD tails, so
// that every path computes each element with the very same expression.
#pragma once

#include "reduce/half.h"

#include <zcx/coll.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
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

// Scalar loops (the reference, and the tails of the SIMD kernels). Buffers need not be
// aligned to the element size: every access goes through memcpy (plain loads on x86).
template <class T>
inline T load_elem(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
inline void store_elem(void* p, size_t i, T v) {
  std::memcpy(static_cast<uint8_t*>(p) + i * sizeof(T), &v, sizeof(T));
}

template <class Op, class T>
inline void scalar_loop(void* out, const void* a, const void* b, size_t n) {
  using C = CalcType<Op, T>;
  for (size_t i = 0; i < n; ++i) {
    C x = static_cast<C>(load_elem<T>(a, i)), y = static_cast<C>(load_elem<T>(b, i));
    store_elem<T>(out, i, static_cast<T>(Op::apply(x, y)));
  }
}
template <class Op>
inline void scalar_loop_half(void* out, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    store_elem<uint16_t>(out, i, half_apply<Op>(load_elem<uint16_t>(a, i), load_elem<uint16_t>(b, i)));
}
template <class Op>
inline void scalar_loop_bhalf(void* out, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    store_elem<uint16_t>(out, i, bhalf_apply<Op>(load_elem<uint16_t>(a, i), load_elem<uint16_t>(b, i)));
}

// avg's last step, buf[i] /= nranks (integers truncate toward zero; 16-bit floats divide in
// float32 and round once). The CPU path and the tests' simulated CUDA runtime share it.
template <class T>
inline void divide_ints(void* buf, size_t n, int nranks) {
  auto* p = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(nranks));
}
template <class T>
inline void divide_floats(void* buf, size_t n, int nranks) {
  auto* p = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = p[i] / static_cast<T>(nranks);
}
template <float (*kTo)(uint16_t), uint16_t (*kFrom)(float)>
inline void divide_halves(void* buf, size_t n, int nranks) {
  auto* p = static_cast<uint16_t*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = kFrom(kTo(p[i]) / static_cast<float>(nranks));
}
inline void divide_by_ranks(zcx_dtype_t dtype, void* buf, size_t n, int nranks) {
  switch (dtype) {
    case ZCX_INT8: return divide_ints<int8_t>(buf, n, nranks);
    case ZCX_UINT8: return divide_ints<uint8_t>(buf, n, nranks);
    case ZCX_INT32: return divide_ints<int32_t>(buf, n, nranks);
    case ZCX_UINT32: return divide_ints<uint32_t>(buf, n, nranks);
    case ZCX_INT64: return divide_ints<int64_t>(buf, n, nranks);
    case ZCX_UINT64: return divide_ints<uint64_t>(buf, n, nranks);
    case ZCX_FLOAT16: return divide_halves<f16_to_f32, f32_to_f16>(buf, n, nranks);
    case ZCX_BFLOAT16: return divide_halves<bf16_to_f32, f32_to_bf16>(buf, n, nranks);
    case ZCX_FLOAT32: return divide_floats<float>(buf, n, nranks);
    case ZCX_FLOAT64: return divide_floats<double>(buf, n, nranks);
    default: return;
  }
}

}  // namespace zcx::coll
