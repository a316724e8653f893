#include "reduce/cuda/reduce_cuda.h"

#include "common/dl/cuda_shim.h"
#include "common/log.h"

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <unordered_map>

// The fatbin built from reduce_kernels.cu, embedded by bin2c (reduce_fatbin.c).
extern "C" const unsigned long long zcx_reduce_fatbin[];  // 8-byte aligned

namespace zcx::coll::cuda {
namespace {

constexpr unsigned kBlock = 256;
constexpr size_t kMaxGrid = 4096;  // grid-stride loops cover the rest

const char* const kOpNames[4] = {"sum", "prod", "min", "max"};

// The kernels of one CUDA context.
struct Module {
  CUmodule module = nullptr;
  CUfunction reduce[ZCX_DTYPE_COUNT][4] = {};
  CUfunction avg[ZCX_DTYPE_COUNT] = {};
  CUfunction stream_wait = nullptr;
};

Status load_functions(const CudaApi* api, Module* m) {
  char name[64];
  for (int d = 0; d < ZCX_DTYPE_COUNT; ++d) {
    const char* dn = zcx_dtype_name(static_cast<zcx_dtype_t>(d));
    for (int o = 0; o < 4; ++o) {
      std::snprintf(name, sizeof name, "zcx_reduce_%s_%s", dn, kOpNames[o]);
      ZCX_CUCHECK(api->cu_module_get_function(&m->reduce[d][o], m->module, name));
    }
    std::snprintf(name, sizeof name, "zcx_avg_%s", dn);
    ZCX_CUCHECK(api->cu_module_get_function(&m->avg[d], m->module, name));
  }
  ZCX_CUCHECK(api->cu_module_get_function(&m->stream_wait, m->module, "zcx_stream_wait"));
  return Status::kSuccess;
}

// Modules stay loaded for the life of the process (like NCCL's kernels): unloading at
// static teardown could race the driver's own.
Status module_for_current_context(const Module** out) {
  static std::mutex mu;
  static auto* modules = new std::unordered_map<CUcontext, Module>();
  const CudaApi* api = cuda_shim();
  if (api == nullptr)
    return set_error(Status::kNoDevice, kLogCuda, "GPU reduction: the CUDA shim is not loaded");
  CUcontext ctx = nullptr;
  ZCX_CUCHECK(api->cu_ctx_get_current(&ctx));
  if (ctx == nullptr)
    return set_error(Status::kInvalidUsage, kLogCuda,
                     "GPU reduction: no current CUDA context on this thread (call cudaSetDevice)");
  std::lock_guard<std::mutex> lock(mu);
  auto it = modules->find(ctx);
  if (it == modules->end()) {
    Module m;
    ZCX_CUCHECK(api->cu_module_load_data(&m.module, zcx_reduce_fatbin));
    Status st = load_functions(api, &m);
    if (!ok(st)) {
      (void)api->cu_module_unload(m.module);
      return st;
    }
    it = modules->emplace(ctx, m).first;
  }
  *out = &it->second;
  return Status::kSuccess;
}

unsigned grid_for(size_t n) {
  size_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

bool aligned(const void* p, size_t elem) { return reinterpret_cast<uintptr_t>(p) % elem == 0; }

Status launch(CUfunction fn, size_t n, void** args, cudaStream_t stream) {
  const CudaApi* api = cuda_shim();
  return cu_check(api->cu_launch_kernel(fn, grid_for(n), 1, 1, kBlock, 1, 1, 0,
                                        reinterpret_cast<CUstream>(stream), args, nullptr),
                  "cuLaunchKernel(reduction)");
}

Status check_args(zcx_dtype_t dtype, const void* p, const char* what) {
  if (dtype < 0 || dtype >= ZCX_DTYPE_COUNT)
    return set_error(Status::kInvalidArg, kLogCuda, "GPU reduction: invalid dtype %d",
                     static_cast<int>(dtype));
  size_t elem = zcx_dtype_size(dtype);
  if (p == nullptr || !aligned(p, elem))
    return set_error(Status::kInvalidArg, kLogCuda,
                     "GPU reduction: %s %p is null or not aligned to its %zu-byte %s elements",
                     what, p, elem, zcx_dtype_name(dtype));
  return Status::kSuccess;
}

}  // namespace

Status reduce_async(zcx_dtype_t dtype, zcx_redop_t op, void* out, const void* a,
                    const void* b, size_t n, cudaStream_t stream) {
  if (n == 0) return Status::kSuccess;
  if (op < 0 || op >= ZCX_REDOP_COUNT)
    return set_error(Status::kInvalidArg, kLogCuda, "GPU reduction: invalid op %d",
                     static_cast<int>(op));
  ZCX_TRY(check_args(dtype, out, "output"));
  ZCX_TRY(check_args(dtype, a, "input a"));
  ZCX_TRY(check_args(dtype, b, "input b"));
  const Module* m = nullptr;
  ZCX_TRY(module_for_current_context(&m));
  int col = op == ZCX_AVG ? ZCX_SUM : op;
  void* args[] = {&out, &a, &b, &n};
  return launch(m->reduce[dtype][col], n, args, stream);
}

Status finalize_avg_async(zcx_dtype_t dtype, void* buf, size_t n, int nranks,
                          cudaStream_t stream) {
  if (n == 0) return Status::kSuccess;
  if (nranks <= 0)
    return set_error(Status::kInvalidArg, kLogCuda, "GPU avg: nranks %d", nranks);
  ZCX_TRY(check_args(dtype, buf, "buffer"));
  const Module* m = nullptr;
  ZCX_TRY(module_for_current_context(&m));
  void* args[] = {&buf, &n, &nranks};
  return launch(m->avg[dtype], n, args, stream);
}

Status load_kernels() {
  const Module* m = nullptr;
  return module_for_current_context(&m);
}

Status stream_wait_async(const uint32_t* flag, uint32_t ticket, uint64_t bound_ns,
                         uint32_t* timed_out, cudaStream_t stream) {
  const Module* m = nullptr;
  ZCX_TRY(module_for_current_context(&m));
  void* args[] = {&flag, &ticket, &bound_ns, &timed_out};
  return cu_check(cuda_shim()->cu_launch_kernel(m->stream_wait, 1, 1, 1, 1, 1, 1, 0,
                                                reinterpret_cast<CUstream>(stream), args, nullptr),
                  "cuLaunchKernel(zcx_stream_wait)");
}

}  // namespace zcx::coll::cuda
