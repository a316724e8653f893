// Device reduction kernels: out[i] = a[i] (op) b[i] for every dtype x op, and the avg
// finalisation buf[i] /= nranks. The element expressions are those of
// collectives/reduce/reduce_elem.h (the CPU reference): integers wrap (sum/prod on the
// unsigned type), min/max are (a < b ? a : b) / (a > b ? a : b), float16/bfloat16 are widened
// to float32, combined, and rounded to nearest even after each operation. Built with
// -fmad=false -ftz=false -prec-div=true so float results are IEEE-exact as on the CPU.
//
// Compiled to a fatbin (sm_80, sm_90 SASS + compute_90 PTX) that reduce_cuda.cc loads with
// cuModuleLoadData through the CUDA shim: libzcx carries no CUDA runtime. Kernel names are
// extern "C" so the host finds them by name: zcx_reduce_<dtype>_<op>, zcx_avg_<dtype>.
#include "half_device.cuh"

#include <stddef.h>
#include <stdint.h>

namespace zcx::coll::cuda {

struct SumOp {
  template <class T> __device__ static T apply(T a, T b) { return static_cast<T>(a + b); }
};
struct ProdOp {
  template <class T> __device__ static T apply(T a, T b) { return static_cast<T>(a * b); }
};
struct MinOp {
  template <class T> __device__ static T apply(T a, T b) { return a < b ? a : b; }
};
struct MaxOp {
  template <class T> __device__ static T apply(T a, T b) { return a > b ? a : b; }
};

template <class T> struct Unsigned { using type = T; };
template <> struct Unsigned<int8_t> { using type = uint8_t; };
template <> struct Unsigned<int32_t> { using type = uint32_t; };
template <> struct Unsigned<int64_t> { using type = uint64_t; };

// Sum and prod compute on the unsigned type (defined wrap-around), min/max on T itself.
template <class Op, class T> struct Calc { using type = T; };
template <class T> struct Calc<SumOp, T> { using type = typename Unsigned<T>::type; };
template <class T> struct Calc<ProdOp, T> { using type = typename Unsigned<T>::type; };

struct Half {};
struct BHalf {};

template <class Op, class T> struct Elem {
  __device__ static T apply(T a, T b) {
    using C = typename Calc<Op, T>::type;
    return static_cast<T>(Op::apply(static_cast<C>(a), static_cast<C>(b)));
  }
};
template <class Op> struct Elem<Op, Half> {
  __device__ static uint16_t apply(uint16_t a, uint16_t b) {
    return f32_to_f16(Op::apply(f16_to_f32(a), f16_to_f32(b)));
  }
};
template <class Op> struct Elem<Op, BHalf> {
  __device__ static uint16_t apply(uint16_t a, uint16_t b) {
    return f32_to_bf16(Op::apply(bf16_to_f32(a), bf16_to_f32(b)));
  }
};

template <class T> struct Storage { using type = T; };
template <> struct Storage<Half> { using type = uint16_t; };
template <> struct Storage<BHalf> { using type = uint16_t; };

template <class Op, class T>
__device__ void reduce_body(void* out, const void* a, const void* b, size_t n) {
  using S = typename Storage<T>::type;
  auto* o = static_cast<S*>(out);
  auto* x = static_cast<const S*>(a);
  auto* y = static_cast<const S*>(b);
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    o[i] = Elem<Op, T>::apply(x[i], y[i]);
}

template <class T> struct Divide {
  __device__ static T apply(T v, int nranks) { return v / static_cast<T>(nranks); }
};
template <> struct Divide<Half> {
  __device__ static uint16_t apply(uint16_t v, int nranks) {
    return f32_to_f16(f16_to_f32(v) / static_cast<float>(nranks));
  }
};
template <> struct Divide<BHalf> {
  __device__ static uint16_t apply(uint16_t v, int nranks) {
    return f32_to_bf16(bf16_to_f32(v) / static_cast<float>(nranks));
  }
};

template <class T>
__device__ void avg_body(void* buf, size_t n, int nranks) {
  using S = typename Storage<T>::type;
  auto* p = static_cast<S*>(buf);
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = static_cast<S>(Divide<T>::apply(p[i], nranks));
}

}  // namespace zcx::coll::cuda

#define ZCX_REDUCE_KERNEL(dname, T, op, Op)                                              \
  extern "C" __global__ void zcx_reduce_##dname##_##op(void* out, const void* a,         \
                                                       const void* b, size_t n) {        \
    zcx::coll::cuda::reduce_body<zcx::coll::cuda::Op, T>(out, a, b, n);                 \
  }
#define ZCX_DTYPE_KERNELS(dname, T)                                                      \
  ZCX_REDUCE_KERNEL(dname, T, sum, SumOp)                                                \
  ZCX_REDUCE_KERNEL(dname, T, prod, ProdOp)                                              \
  ZCX_REDUCE_KERNEL(dname, T, min, MinOp)                                                \
  ZCX_REDUCE_KERNEL(dname, T, max, MaxOp)                                                \
  extern "C" __global__ void zcx_avg_##dname(void* buf, size_t n, int nranks) {         \
    zcx::coll::cuda::avg_body<T>(buf, n, nranks);                                        \
  }

ZCX_DTYPE_KERNELS(int8, int8_t)
ZCX_DTYPE_KERNELS(uint8, uint8_t)
ZCX_DTYPE_KERNELS(int32, int32_t)
ZCX_DTYPE_KERNELS(uint32, uint32_t)
ZCX_DTYPE_KERNELS(int64, int64_t)
ZCX_DTYPE_KERNELS(uint64, uint64_t)
ZCX_DTYPE_KERNELS(float16, zcx::coll::cuda::Half)
ZCX_DTYPE_KERNELS(bfloat16, zcx::coll::cuda::BHalf)
ZCX_DTYPE_KERNELS(float32, float)
ZCX_DTYPE_KERNELS(float64, double)

// Not a reduction, but the same module: the stream wait of asynchronous calls.
#include "stream_wait_device.cuh"
