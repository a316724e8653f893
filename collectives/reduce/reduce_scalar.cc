// The scalar reference kernels: the definition of every reduction's result.
#include "reduce/reduce.h"
#include "reduce/reduce_elem.h"

namespace zcx::coll {
namespace {

template <class Op, class T>
void kernel(void* out, const void* a, const void* b, size_t n) {
  scalar_loop<Op, T>(out, a, b, n);
}
template <class Op>
void kernel_half(void* out, const void* a, const void* b, size_t n) {
  scalar_loop_half<Op>(out, a, b, n);
}
template <class Op>
void kernel_bhalf(void* out, const void* a, const void* b, size_t n) {
  scalar_loop_bhalf<Op>(out, a, b, n);
}

template <class T>
void fill_row(ReduceFn* row) {
  row[0] = kernel<SumOp, T>;
  row[1] = kernel<ProdOp, T>;
  row[2] = kernel<MinOp, T>;
  row[3] = kernel<MaxOp, T>;
}

}  // namespace

void fill_scalar_kernels(KernelTable& t) {
  fill_row<int8_t>(t[ZCX_INT8]);
  fill_row<uint8_t>(t[ZCX_UINT8]);
  fill_row<int32_t>(t[ZCX_INT32]);
  fill_row<uint32_t>(t[ZCX_UINT32]);
  fill_row<int64_t>(t[ZCX_INT64]);
  fill_row<uint64_t>(t[ZCX_UINT64]);
  fill_row<float>(t[ZCX_FLOAT32]);
  fill_row<double>(t[ZCX_FLOAT64]);
  t[ZCX_FLOAT16][0] = kernel_half<SumOp>;
  t[ZCX_FLOAT16][1] = kernel_half<ProdOp>;
  t[ZCX_FLOAT16][2] = kernel_half<MinOp>;
  t[ZCX_FLOAT16][3] = kernel_half<MaxOp>;
  t[ZCX_BFLOAT16][0] = kernel_bhalf<SumOp>;
  t[ZCX_BFLOAT16][1] = kernel_bhalf<ProdOp>;
  t[ZCX_BFLOAT16][2] = kernel_bhalf<MinOp>;
  t[ZCX_BFLOAT16][3] = kernel_bhalf<MaxOp>;
}

}  // namespace zcx::coll
