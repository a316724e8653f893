// The CUDA driver (libcuda.so.1) and runtime (libcudart.so.13) loaded at run time through one
// shim. libzcx never links either, so it loads and runs on a machine without a GPU or driver
// (`ldd libzcx.so` shows neither). Built only with ZCX_HAVE_CUDA: the toolkit headers give
// the types, and every entry point is declared with decltype of the header's declaration, so
// versioned names (cuMemGetAddressRange -> cuMemGetAddressRange_v2) keep their signature.
//
// Every CUDA failure becomes a zcx Status through cuda_check/cu_check, whose message carries
// the call, cudaGetErrorName/cudaGetErrorString (or cuGetErrorName/cuGetErrorString) text.
#pragma once

#include "common/dl/device_memory.h"
#include "common/status.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

namespace zcx {

struct CudaApi {
  // Driver: device discovery, modules (the reduction kernels), pointer queries, VMM export.
  decltype(&::cuInit) cu_init;
  decltype(&::cuGetErrorName) cu_get_error_name;
  decltype(&::cuGetErrorString) cu_get_error_string;
  decltype(&::cuDriverGetVersion) cu_driver_get_version;
  decltype(&::cuCtxGetCurrent) cu_ctx_get_current;
  decltype(&::cuModuleLoadData) cu_module_load_data;
  decltype(&::cuModuleUnload) cu_module_unload;
  decltype(&::cuModuleGetFunction) cu_module_get_function;
  decltype(&::cuLaunchKernel) cu_launch_kernel;
  decltype(&::cuPointerGetAttribute) cu_pointer_get_attribute;
  decltype(&::cuMemGetAddressRange) cu_mem_get_address_range;
  decltype(&::cuMemRetainAllocationHandle) cu_mem_retain_allocation_handle;
  decltype(&::cuMemRelease) cu_mem_release;
  decltype(&::cuMemExportToShareableHandle) cu_mem_export_to_shareable_handle;
  decltype(&::cuMemImportFromShareableHandle) cu_mem_import_from_shareable_handle;
  decltype(&::cuMemGetAllocationPropertiesFromHandle) cu_mem_get_allocation_properties;
  decltype(&::cuMemAddressReserve) cu_mem_address_reserve;
  decltype(&::cuMemAddressFree) cu_mem_address_free;
  decltype(&::cuMemMap) cu_mem_map;
  decltype(&::cuMemUnmap) cu_mem_unmap;
  decltype(&::cuMemSetAccess) cu_mem_set_access;
  decltype(&::cuMemCreate) cu_mem_create;
  decltype(&::cuMemGetAllocationGranularity) cu_mem_get_allocation_granularity;
  decltype(&::cuMemGetHandleForAddressRange) cu_mem_get_handle_for_address_range;  // or null
  // Runtime: devices, IPC handles, copies, streams and events.
  decltype(&::cudaGetErrorName) get_error_name;
  decltype(&::cudaGetErrorString) get_error_string;
  decltype(&::cudaRuntimeGetVersion) runtime_get_version;
  decltype(&::cudaGetDeviceCount) get_device_count;
  decltype(&::cudaGetDevice) get_device;
  decltype(&::cudaSetDevice) set_device;
  decltype(&::cudaDeviceGetAttribute) device_get_attribute;
  decltype(&::cudaDeviceGetPCIBusId) device_get_pci_bus_id;
  decltype(&::cudaDeviceCanAccessPeer) device_can_access_peer;
  decltype(&::cudaPointerGetAttributes) pointer_get_attributes;
  decltype(&::cudaMalloc) mem_alloc;
  decltype(&::cudaFree) mem_free;
  decltype(&::cudaMallocHost) host_alloc;
  decltype(&::cudaFreeHost) host_free;
  decltype(&::cudaMemcpy) copy;
  decltype(&::cudaMemcpyAsync) copy_async;
  decltype(&::cudaMemsetAsync) set_async;
  decltype(&::cudaIpcGetMemHandle) ipc_get_mem_handle;
  decltype(&::cudaIpcOpenMemHandle) ipc_open_mem_handle;
  decltype(&::cudaIpcCloseMemHandle) ipc_close_mem_handle;
  decltype(&::cudaStreamCreateWithFlags) stream_create_with_flags;
  decltype(&::cudaStreamDestroy) stream_destroy;
  decltype(&::cudaStreamSynchronize) stream_synchronize;
  decltype(&::cudaStreamWaitEvent) stream_wait_event;
  decltype(&::cudaEventCreateWithFlags) event_create_with_flags;
  decltype(&::cudaEventDestroy) event_destroy;
  decltype(&::cudaEventRecord) event_record;
  decltype(&::cudaEventQuery) event_query;
  decltype(&::cudaEventElapsedTime) event_elapsed_time;
  decltype(&::cudaDeviceSynchronize) device_synchronize;
  // Makes what a NIC wrote into device memory (GPUDirect RDMA) visible to the GPU.
  decltype(&::cudaDeviceFlushGPUDirectRDMAWrites) flush_gpudirect_rdma_writes;
};

// Loads both libraries once per process (names from ZCX_CUDA_DRIVER_LIBRARY and
// ZCX_CUDA_RUNTIME_LIBRARY) and returns the table, or nullptr with *why saying what is
// missing ("no CUDA driver: libcuda.so.1: cannot open shared object file ..."). A failed
// load is retried on the next call; a successful one is kept for the life of the process.
const CudaApi* cuda_shim_load(std::string* why);
// The loaded table, nullptr before a successful cuda_shim_load. Lock-free.
const CudaApi* cuda_shim();
// The driver's dmabuf export (cuMemGetHandleForAddressRange), loading the driver alone if
// need be: ib registers GPU memory with it where the job's CUDA runtime is not one libzcx
// can load. nullptr, and *why, without a driver or where the driver lacks it.
decltype(&::cuMemGetHandleForAddressRange) cuda_dmabuf_export(std::string* why);
// cuda_is_device_memory: common/dl/device_memory.h.

// How many allocations hold [p, p + bytes): 1 for a range inside one cudaMalloc allocation or
// one cuMem allocation; more where cuMem allocations are mapped back to back in one virtual
// range (PyTorch's expandable segments), which cuMemGetAddressRange reports one at a time;
// 0 where part of the range is neither, and before the shim is loaded. Driver queries only
// (cuMemGetAddressRange, cuMemRetainAllocationHandle), in the calling thread's context. A
// range that starts in cudaMalloc memory never continues into a neighbour.
size_t cuda_allocations_spanned(const void* p, size_t bytes);

// One line for zcx-info and test skips: "2 CUDA devices (driver 13.0, runtime 13.0)",
// "no CUDA driver (...)" or "CUDA driver loaded, no device (...)". Never fails.
std::string cuda_shim_describe();
// Devices visible through the runtime; 0 (and *why) when there is no driver or no device.
int cuda_device_count(std::string* why);

// A failed runtime/driver call as a Status (kSuccess when e is success), with the call
// named and the library's error text. Logs under kLogCuda.
Status cuda_check(cudaError_t e, const char* what);
Status cu_check(CUresult e, const char* what);

// Makes `device` current for the guard's lifetime and restores the previous one after.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;
  Status status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_ = Status::kSuccess;
};

}  // namespace zcx

// A runtime call whose failure returns from the enclosing function as a Status.
#define ZCX_CUDACHECK(call)                                                  \
  do {                                                                       \
    ::zcx::Status zcx_cuda_st_ = ::zcx::cuda_check((call), #call);           \
    if (zcx_cuda_st_ != ::zcx::Status::kSuccess) return zcx_cuda_st_;        \
  } while (0)
// The same for a driver call.
#define ZCX_CUCHECK(call)                                                    \
  do {                                                                       \
    ::zcx::Status zcx_cu_st_ = ::zcx::cu_check((call), #call);               \
    if (zcx_cu_st_ != ::zcx::Status::kSuccess) return zcx_cu_st_;            \
  } while (0)
