// Generic SIMD reduction kernels written with GCC vector extensions. Included by
// reduce_avx2.cc and reduce_avx512.cc inside `#pragma GCC target(...)` and an anonymous
// namespace, with ZCX_VB (vector bytes) and the float16 helpers half_load / half_store
// defined by the includer; the compiler emits that level's instructions. The tails reuse the
// scalar loops of reduce_elem.h, so every element is computed by the reference expression.
// Not a normal header: no include guard on purpose.

// The vector forms of the operators, defined here so that they are compiled for this
// file's target (the scalar ones in reduce_elem.h are not).
template <class Op> struct VOp;
template <> struct VOp<SumOp> {
  template <class V> static V apply(V a, V b) { return a + b; }
};
template <> struct VOp<ProdOp> {
  template <class V> static V apply(V a, V b) { return a * b; }
};
template <> struct VOp<MinOp> {
  template <class V> static V apply(V a, V b) { return a < b ? a : b; }
};
template <> struct VOp<MaxOp> {
  template <class V> static V apply(V a, V b) { return a > b ? a : b; }
};

template <class Op, class T>
void vkernel(void* out, const void* a, const void* b, size_t n) {
  using C = CalcType<Op, T>;
  typedef C V __attribute__((vector_size(ZCX_VB)));
  constexpr size_t kW = ZCX_VB / sizeof(C);
  // Byte pointers: the buffers need not be aligned to the element size.
  auto* o = static_cast<uint8_t*>(out);
  auto* x = static_cast<const uint8_t*>(a);
  auto* y = static_cast<const uint8_t*>(b);
  constexpr size_t kE = sizeof(T);
  size_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    V va0, vb0, va1, vb1;
    std::memcpy(&va0, x + i * kE, sizeof(V));
    std::memcpy(&vb0, y + i * kE, sizeof(V));
    std::memcpy(&va1, x + (i + kW) * kE, sizeof(V));
    std::memcpy(&vb1, y + (i + kW) * kE, sizeof(V));
    V r0 = VOp<Op>::apply(va0, vb0);
    V r1 = VOp<Op>::apply(va1, vb1);
    std::memcpy(o + i * kE, &r0, sizeof(V));
    std::memcpy(o + (i + kW) * kE, &r1, sizeof(V));
  }
  for (; i + kW <= n; i += kW) {
    V va, vb;
    std::memcpy(&va, x + i * kE, sizeof(V));
    std::memcpy(&vb, y + i * kE, sizeof(V));
    V r = VOp<Op>::apply(va, vb);
    std::memcpy(o + i * kE, &r, sizeof(V));
  }
  scalar_loop<Op, T>(o + i * kE, x + i * kE, y + i * kE, n - i);
}

typedef float VecF __attribute__((vector_size(ZCX_VB)));
typedef uint32_t VecU __attribute__((vector_size(ZCX_VB)));
typedef uint16_t VecH __attribute__((vector_size(ZCX_VB / 2)));

inline VecF bhalf_load(const uint16_t* p) {
  VecH h;
  std::memcpy(&h, p, sizeof h);
  VecU u = __builtin_convertvector(h, VecU) << 16;
  return (VecF)u;
}

// Round to nearest even, NaN -> quiet NaN: the same integer steps as f32_to_bf16.
inline void bhalf_store(uint16_t* p, VecF f) {
  VecU x = (VecU)f;
  VecU rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  VecU quiet = (x >> 16) | 0x40u;
  VecU r = (x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
  VecH h = __builtin_convertvector(r, VecH);
  std::memcpy(p, &h, sizeof h);
}

template <class Op>
void vkernel_half(void* out, const void* a, const void* b, size_t n) {
  constexpr size_t kW = ZCX_VB / sizeof(float);
  auto* o = static_cast<uint16_t*>(out);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + kW <= n; i += kW) half_store(o + i, VOp<Op>::apply(half_load(x + i), half_load(y + i)));
  scalar_loop_half<Op>(o + i, x + i, y + i, n - i);
}

template <class Op>
void vkernel_bhalf(void* out, const void* a, const void* b, size_t n) {
  constexpr size_t kW = ZCX_VB / sizeof(float);
  auto* o = static_cast<uint16_t*>(out);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + kW <= n; i += kW)
    bhalf_store(o + i, VOp<Op>::apply(bhalf_load(x + i), bhalf_load(y + i)));
  scalar_loop_bhalf<Op>(o + i, x + i, y + i, n - i);
}
