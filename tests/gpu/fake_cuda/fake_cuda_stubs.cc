// The simulated CUDA runtime's error names and strings, and the calls it does not simulate:
// virtual memory management (cuMem*), which fails with CUDA_ERROR_NOT_SUPPORTED (so the VMM
// cases of the GPU tests run only on a GPU).
#include "fake_cuda.h"

// ---- driver ----
FAKE_API CUresult cuGetErrorName(CUresult e, const char** s) {
  *s = e == CUDA_SUCCESS ? "CUDA_SUCCESS"
       : e == CUDA_ERROR_NOT_INITIALIZED ? "CUDA_ERROR_NOT_INITIALIZED" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGetErrorString(CUresult e, const char** s) {
  *s = e == CUDA_SUCCESS ? "no error"
       : e == CUDA_ERROR_NOT_INITIALIZED
           ? "initialization error (CUDA was initialised before this process was forked)"
           : "not supported by the simulated CUDA runtime";
  return CUDA_SUCCESS;
}

// Virtual memory management (cuMem*): not simulated.
namespace {
using Handle = CUmemGenericAllocationHandle;
constexpr CUresult kNo = CUDA_ERROR_NOT_SUPPORTED;
}  // namespace
FAKE_API CUresult cuMemRetainAllocationHandle(Handle*, void*) { return kNo; }
FAKE_API CUresult cuMemRelease(Handle) { return kNo; }
FAKE_API CUresult cuMemExportToShareableHandle(void*, Handle, CUmemAllocationHandleType,
                                               unsigned long long) { return kNo; }
FAKE_API CUresult cuMemImportFromShareableHandle(Handle*, void*, CUmemAllocationHandleType) {
  return kNo;
}
FAKE_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp*, Handle) {
  return kNo;
}
FAKE_API CUresult cuMemAddressReserve(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                      unsigned long long) { return kNo; }
FAKE_API CUresult cuMemAddressFree(CUdeviceptr, size_t) { return kNo; }
FAKE_API CUresult cuMemMap(CUdeviceptr, size_t, size_t, Handle, unsigned long long) { return kNo; }
FAKE_API CUresult cuMemUnmap(CUdeviceptr, size_t) { return kNo; }
FAKE_API CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) { return kNo; }
FAKE_API CUresult cuMemCreate(Handle*, size_t, const CUmemAllocationProp*, unsigned long long) {
  return kNo;
}
FAKE_API CUresult cuMemGetAllocationGranularity(size_t*, const CUmemAllocationProp*,
                                                CUmemAllocationGranularity_flags) { return kNo; }

// ---- runtime ----
FAKE_API const char* cudaGetErrorName(cudaError_t e) {
  if (e == cudaErrorAlreadyMapped) return "cudaErrorAlreadyMapped";
  if (e == cudaErrorInitializationError) return "cudaErrorInitializationError";
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake";
}
FAKE_API const char* cudaGetErrorString(cudaError_t e) {
  if (e == cudaErrorAlreadyMapped) return "resource already mapped";
  if (e == cudaErrorInitializationError)
    return "initialization error (CUDA was initialised before this process was forked)";
  return e == cudaSuccess ? "no error" : "not supported by the simulated CUDA runtime";
}
