// The simulated CUDA runtime's error names and strings.
#include "fake_cuda.h"

// ---- driver ----
namespace {
struct DriverError {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr DriverError kDriverErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
     "initialization error (CUDA was initialised before this process was forked)"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
     "operation not supported by the simulated CUDA runtime"},
};
const DriverError* driver_error(CUresult e) {
  for (const DriverError& d : kDriverErrors)
    if (d.code == e) return &d;
  return nullptr;
}
}  // namespace
FAKE_API CUresult cuGetErrorName(CUresult e, const char** s) {
  const DriverError* d = driver_error(e);
  *s = d ? d->name : nullptr;
  return d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_API CUresult cuGetErrorString(CUresult e, const char** s) {
  const DriverError* d = driver_error(e);
  *s = d ? d->text : nullptr;
  return d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

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
