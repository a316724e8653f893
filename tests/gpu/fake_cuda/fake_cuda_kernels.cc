// zcx's CUDA module in the simulated runtime (fake_cuda.cc): cuModuleLoadData hands out the
// CPU scalar reduction kernels under their device names, and cuLaunchKernel queues them on
// the stream. zcx_stream_wait holds its stream as the device kernel does: it polls the host
// word until the ticket is reached, or gives up after its bound and writes *timed_out.
#include "fake_cuda.h"

#include "reduce/reduce.h"
#include "reduce/reduce_elem.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace {

// Kernels by name: zcx_reduce_<dtype>_<op>, zcx_avg_<dtype>, zcx_stream_wait.
enum class KernelKind { kReduce, kAvg, kStreamWait };
struct Kernel {
  KernelKind kind = KernelKind::kReduce;
  int dtype = 0, op = 0;
};
Kernel g_stream_wait{KernelKind::kStreamWait, 0, 0};

// The module's contents, built once: thread ranks of one process load the module and look up
// its kernels concurrently while others launch them.
struct Module {
  zcx::coll::KernelTable table;
  Kernel kernels[ZCX_DTYPE_COUNT][5];
  Module() {
    zcx::coll::fill_scalar_kernels(table);
    for (int d = 0; d < ZCX_DTYPE_COUNT; ++d) {
      for (int o = 0; o < 4; ++o) kernels[d][o] = Kernel{KernelKind::kReduce, d, o};
      kernels[d][4] = Kernel{KernelKind::kAvg, d, 0};
    }
  }
};
Module& module() {
  static Module m;
  return m;
}

const char* const kDtypeNames[ZCX_DTYPE_COUNT] = {"int8",    "uint8",    "int32",   "uint32",
                                                  "int64",   "uint64",   "float16", "bfloat16",
                                                  "float32", "float64"};
const char* const kOpNames[4] = {"sum", "prod", "min", "max"};

// Under ThreadSanitizer the reduction kernels (reduce_scalar.cc) are built without its check
// of every element they load and store (CMakeLists.txt), which cost as much as all the
// simulated copies; a launch reports the whole ranges it reads and writes instead, so a
// kernel racing a copy or another stream is still caught.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_read_range(void* addr, unsigned long size);
extern "C" void __tsan_write_range(void* addr, unsigned long size);
void kernel_reads(const void* p, size_t n) { __tsan_read_range(const_cast<void*>(p), n); }
void kernel_writes(void* p, size_t n) { __tsan_write_range(p, n); }
#else
void kernel_reads(const void*, size_t) {}
void kernel_writes(void*, size_t) {}
#endif

template <class T>
T arg(void** p, int i) {
  return *static_cast<T*>(p[i]);
}

void stream_wait(const uint32_t* flag, uint32_t ticket, uint64_t bound_ns, uint32_t* timed_out) {
  const auto start = std::chrono::steady_clock::now();
  auto* word = const_cast<uint32_t*>(flag);
  while (static_cast<int32_t>(__atomic_load_n(word, __ATOMIC_ACQUIRE) - ticket) < 0) {
    if (std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(bound_ns)) {
      __atomic_store_n(timed_out, ticket, __ATOMIC_RELEASE);
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

FAKE_API CUresult cuModuleLoadData(CUmodule* m, const void*) {
  *m = reinterpret_cast<CUmodule>(&module());
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
FAKE_API CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  if (std::strcmp(name, "zcx_stream_wait") == 0) {
    *f = reinterpret_cast<CUfunction>(&g_stream_wait);
    return CUDA_SUCCESS;
  }
  char want[64];
  for (int d = 0; d < ZCX_DTYPE_COUNT; ++d) {
    for (int o = 0; o < 4; ++o) {
      std::snprintf(want, sizeof want, "zcx_reduce_%s_%s", kDtypeNames[d], kOpNames[o]);
      if (std::strcmp(want, name) != 0) continue;
      *f = reinterpret_cast<CUfunction>(&module().kernels[d][o]);
      return CUDA_SUCCESS;
    }
    std::snprintf(want, sizeof want, "zcx_avg_%s", kDtypeNames[d]);
    if (std::strcmp(want, name) != 0) continue;
    *f = reinterpret_cast<CUfunction>(&module().kernels[d][4]);
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_FOUND;
}
FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 unsigned, unsigned, CUstream s, void** p, void**) {
  const Kernel k = *reinterpret_cast<Kernel*>(f);
  auto stream = reinterpret_cast<cudaStream_t>(s);
  if (k.kind == KernelKind::kStreamWait) {
    auto flag = arg<const uint32_t*>(p, 0);
    auto ticket = arg<uint32_t>(p, 1);
    auto bound = arg<uint64_t>(p, 2);
    auto timed_out = arg<uint32_t*>(p, 3);
    if (!fake_cuda_device_reaches(flag, sizeof *flag, "zcx_stream_wait's flag") ||
        !fake_cuda_device_reaches(timed_out, sizeof *timed_out, "zcx_stream_wait's timeout word"))
      return CUDA_ERROR_INVALID_VALUE;
    fake_cuda_enqueue(stream, [=] { stream_wait(flag, ticket, bound, timed_out); });
    return CUDA_SUCCESS;
  }
  if (k.kind == KernelKind::kAvg) {
    void* buf = arg<void*>(p, 0);
    size_t n = arg<size_t>(p, 1);
    int nranks = arg<int>(p, 2);
    const size_t bytes = n * zcx::coll::dtype_bytes(static_cast<zcx_dtype_t>(k.dtype));
    if (!fake_cuda_device_reaches(buf, bytes, "zcx_avg")) return CUDA_ERROR_INVALID_VALUE;
    fake_cuda_enqueue(stream, [=] {
      zcx::coll::divide_by_ranks(static_cast<zcx_dtype_t>(k.dtype), buf, n, nranks);
    });
    return CUDA_SUCCESS;
  }
  void* out = arg<void*>(p, 0);
  const void* a = arg<const void*>(p, 1);
  const void* b = arg<const void*>(p, 2);
  size_t n = arg<size_t>(p, 3);
  const size_t bytes = n * zcx::coll::dtype_bytes(static_cast<zcx_dtype_t>(k.dtype));
  if (!fake_cuda_device_reaches(out, bytes, "zcx_reduce's output") ||
      !fake_cuda_device_reaches(a, bytes, "zcx_reduce's first input") ||
      !fake_cuda_device_reaches(b, bytes, "zcx_reduce's second input"))
    return CUDA_ERROR_INVALID_VALUE;
  zcx::coll::ReduceFn fn = module().table[k.dtype][k.op];
  fake_cuda_enqueue(stream, [=] {
    kernel_reads(a, bytes);
    kernel_reads(b, bytes);
    fn(out, a, b, n);
    kernel_writes(out, bytes);
  });
  return CUDA_SUCCESS;
}
