// The kernel table of one SIMD level: fills a KernelTable with the vkernel* templates of
// reduce_vec.h. Included by reduce_avx2.cc / reduce_avx512.cc AFTER their target pragma is
// popped, inside the same anonymous namespace: the fill function runs on every CPU (before
// dispatch decides anything), so it must be compiled for the baseline target — compiled
// under the AVX-512 pragma, GCC vectorised these stores with AVX-512 and the library died
// with SIGILL on an AVX2-only CPU. The kernels keep the target they were defined under.
// Not a normal header: no include guard on purpose.

template <class T>
void fill_vec_row(ReduceFn* row) {
  row[0] = vkernel<SumOp, T>;
  row[1] = vkernel<ProdOp, T>;
  row[2] = vkernel<MinOp, T>;
  row[3] = vkernel<MaxOp, T>;
}

void fill_vec_table(KernelTable& t) {
  fill_vec_row<int8_t>(t[ZCX_INT8]);
  fill_vec_row<uint8_t>(t[ZCX_UINT8]);
  fill_vec_row<int32_t>(t[ZCX_INT32]);
  fill_vec_row<uint32_t>(t[ZCX_UINT32]);
  fill_vec_row<int64_t>(t[ZCX_INT64]);
  fill_vec_row<uint64_t>(t[ZCX_UINT64]);
  fill_vec_row<float>(t[ZCX_FLOAT32]);
  fill_vec_row<double>(t[ZCX_FLOAT64]);
  t[ZCX_FLOAT16][0] = vkernel_half<SumOp>;
  t[ZCX_FLOAT16][1] = vkernel_half<ProdOp>;
  t[ZCX_FLOAT16][2] = vkernel_half<MinOp>;
  t[ZCX_FLOAT16][3] = vkernel_half<MaxOp>;
  t[ZCX_BFLOAT16][0] = vkernel_bhalf<SumOp>;
  t[ZCX_BFLOAT16][1] = vkernel_bhalf<ProdOp>;
  t[ZCX_BFLOAT16][2] = vkernel_bhalf<MinOp>;
  t[ZCX_BFLOAT16][3] = vkernel_bhalf<MaxOp>;
}
