// Run-time dispatch of the reduction kernels, the avg finalisation, and dtype/op names.
#include "reduce/reduce.h"
#include "reduce/reduce_elem.h"

#include "common/config.h"
#include "common/log.h"
#include "reduce/half.h"

#include <cstdint>
#include <string>

namespace zcx::coll {
namespace {

const config::StringParam kSimdParam(
    "ZCX_COLL_SIMD", "auto",
    "CPU reduction kernels: auto (best the CPU has), scalar, avx2 or avx512");

struct Tables {
  KernelTable level[3] = {};
  Tables() {
    fill_scalar_kernels(level[0]);
    fill_avx2_kernels(level[1]);
    fill_avx512_kernels(level[2]);
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

SimdLevel detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
    return SimdLevel::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("fma"))
    return SimdLevel::kAvx2;
  return SimdLevel::kScalar;
}

SimdLevel cap_from_param() {
  std::string v = kSimdParam.get();
  if (v == "scalar") return SimdLevel::kScalar;
  if (v == "avx2") return SimdLevel::kAvx2;
  if (v != "auto" && v != "avx512")
    ZCX_WARN(kLogColl, "ZCX_COLL_SIMD=%s is not auto|scalar|avx2|avx512; using auto", v.c_str());
  return SimdLevel::kAvx512;
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvx512: return "avx512";
  }
  return "?";
}

bool simd_supported(SimdLevel level) { return static_cast<int>(level) <= static_cast<int>(detect()); }

SimdLevel simd_level() {
  static const SimdLevel hw = detect();
  SimdLevel cap = cap_from_param();
  return static_cast<int>(cap) < static_cast<int>(hw) ? cap : hw;
}

ReduceFn reduce_fn(zcx_dtype_t dtype, zcx_redop_t op, SimdLevel level) {
  if (dtype < 0 || dtype >= ZCX_DTYPE_COUNT || op < 0 || op >= ZCX_REDOP_COUNT) return nullptr;
  int col = op == ZCX_AVG ? ZCX_SUM : op;
  for (int l = static_cast<int>(level); l >= 0; --l)
    if (ReduceFn fn = tables().level[l][dtype][col]) return fn;
  return nullptr;
}

ReduceFn reduce_fn_scalar(zcx_dtype_t dtype, zcx_redop_t op) {
  return reduce_fn(dtype, op, SimdLevel::kScalar);
}

void reduce(zcx_dtype_t dtype, zcx_redop_t op, void* out, const void* a, const void* b,
            size_t n) {
  static const SimdLevel level = simd_level();
  if (n == 0) return;
  reduce_fn(dtype, op, level)(out, a, b, n);
}

void finalize_avg(zcx_dtype_t dtype, void* buf, size_t n, int nranks) {
  divide_by_ranks(dtype, buf, n, nranks);
}

}  // namespace zcx::coll

extern "C" {

ZCX_API size_t zcx_dtype_size(zcx_dtype_t dtype) { return zcx::coll::dtype_bytes(dtype); }

ZCX_API const char* zcx_dtype_name(zcx_dtype_t dtype) {
  static const char* const kNames[ZCX_DTYPE_COUNT] = {
      "int8", "uint8", "int32", "uint32", "int64", "uint64",
      "float16", "bfloat16", "float32", "float64"};
  return dtype >= 0 && dtype < ZCX_DTYPE_COUNT ? kNames[dtype] : "invalid";
}

ZCX_API const char* zcx_redop_name(zcx_redop_t op) {
  static const char* const kNames[ZCX_REDOP_COUNT] = {"sum", "prod", "min", "max", "avg"};
  return op >= 0 && op < ZCX_REDOP_COUNT ? kNames[op] : "invalid";
}

}  // extern "C"
