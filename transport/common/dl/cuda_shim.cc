#include "common/dl/cuda_shim.h"

#include "common/config.h"
#include "common/dl/dl.h"
#include "common/log.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

namespace zcx {
namespace {

const config::StringParam driver_library{"ZCX_CUDA_DRIVER_LIBRARY", "libcuda.so.1",
    "The CUDA driver library that libzcx loads at run time (never linked)."};
const config::StringParam runtime_library{"ZCX_CUDA_RUNTIME_LIBRARY", "libcudart.so.13",
    "The CUDA runtime library that libzcx loads at run time (never linked); it must be the "
    "major version zcx was built with."};

struct Loaded {
  std::mutex mu;
  DlLibrary driver;
  DlLibrary runtime;
  CudaApi api{};
  bool driver_ready = false;  // the driver's entry points are in api (under mu)
  // Set once, under mu, when both libraries resolved; read without the lock (never unset).
  std::atomic<const CudaApi*> ready{nullptr};
};

Loaded& loaded() {
  static Loaded* l = new Loaded();  // never destroyed: CUDA objects may outlive static teardown
  return *l;
}

// Versioned driver names are spelled out: dlsym sees symbols, not cuda.h's macros.
bool resolve_driver(DlLibrary& d, CudaApi* a, std::string* why) {
  // Optional: drivers before CUDA 11.7 lack it; null then (ib's dmabuf registration checks).
  (void)d.symbol("cuMemGetHandleForAddressRange", a->cu_mem_get_handle_for_address_range);
  return d.need("cuInit", a->cu_init, why) &&
         d.need("cuGetErrorName", a->cu_get_error_name, why) &&
         d.need("cuGetErrorString", a->cu_get_error_string, why) &&
         d.need("cuDriverGetVersion", a->cu_driver_get_version, why) &&
         d.need("cuCtxGetCurrent", a->cu_ctx_get_current, why) &&
         d.need("cuModuleLoadData", a->cu_module_load_data, why) &&
         d.need("cuModuleUnload", a->cu_module_unload, why) &&
         d.need("cuModuleGetFunction", a->cu_module_get_function, why) &&
         d.need("cuLaunchKernel", a->cu_launch_kernel, why) &&
         d.need("cuPointerGetAttribute", a->cu_pointer_get_attribute, why) &&
         d.need("cuMemGetAddressRange_v2", a->cu_mem_get_address_range, why) &&
         d.need("cuMemRetainAllocationHandle", a->cu_mem_retain_allocation_handle, why) &&
         d.need("cuMemRelease", a->cu_mem_release, why) &&
         d.need("cuMemExportToShareableHandle", a->cu_mem_export_to_shareable_handle, why) &&
         d.need("cuMemImportFromShareableHandle", a->cu_mem_import_from_shareable_handle, why) &&
         d.need("cuMemGetAllocationPropertiesFromHandle", a->cu_mem_get_allocation_properties, why) &&
         d.need("cuMemAddressReserve", a->cu_mem_address_reserve, why) &&
         d.need("cuMemAddressFree", a->cu_mem_address_free, why) &&
         d.need("cuMemMap", a->cu_mem_map, why) &&
         d.need("cuMemUnmap", a->cu_mem_unmap, why) &&
         d.need("cuMemSetAccess", a->cu_mem_set_access, why) &&
         d.need("cuMemCreate", a->cu_mem_create, why) &&
         d.need("cuMemGetAllocationGranularity", a->cu_mem_get_allocation_granularity, why);
}

bool resolve_runtime_devices(DlLibrary& r, CudaApi* a, std::string* why) {
  return r.need("cudaGetErrorName", a->get_error_name, why) &&
         r.need("cudaGetErrorString", a->get_error_string, why) &&
         r.need("cudaRuntimeGetVersion", a->runtime_get_version, why) &&
         r.need("cudaGetDeviceCount", a->get_device_count, why) &&
         r.need("cudaGetDevice", a->get_device, why) &&
         r.need("cudaSetDevice", a->set_device, why) &&
         r.need("cudaDeviceGetAttribute", a->device_get_attribute, why) &&
         r.need("cudaDeviceGetPCIBusId", a->device_get_pci_bus_id, why) &&
         r.need("cudaDeviceCanAccessPeer", a->device_can_access_peer, why) &&
         r.need("cudaPointerGetAttributes", a->pointer_get_attributes, why) &&
         r.need("cudaDeviceSynchronize", a->device_synchronize, why) &&
         r.need("cudaDeviceFlushGPUDirectRDMAWrites", a->flush_gpudirect_rdma_writes, why);
}

bool resolve_runtime_memory(DlLibrary& r, CudaApi* a, std::string* why) {
  return r.need("cudaMalloc", a->mem_alloc, why) && r.need("cudaFree", a->mem_free, why) &&
         r.need("cudaMallocHost", a->host_alloc, why) &&
         r.need("cudaFreeHost", a->host_free, why) && r.need("cudaMemcpy", a->copy, why) &&
         r.need("cudaMemcpyAsync", a->copy_async, why) &&
         r.need("cudaMemsetAsync", a->set_async, why) &&
         r.need("cudaIpcGetMemHandle", a->ipc_get_mem_handle, why) &&
         r.need("cudaIpcOpenMemHandle", a->ipc_open_mem_handle, why) &&
         r.need("cudaIpcCloseMemHandle", a->ipc_close_mem_handle, why);
}

bool resolve_runtime_streams(DlLibrary& r, CudaApi* a, std::string* why) {
  return r.need("cudaStreamCreateWithFlags", a->stream_create_with_flags, why) &&
         r.need("cudaStreamDestroy", a->stream_destroy, why) &&
         r.need("cudaStreamSynchronize", a->stream_synchronize, why) &&
         r.need("cudaStreamWaitEvent", a->stream_wait_event, why) &&
         r.need("cudaEventCreateWithFlags", a->event_create_with_flags, why) &&
         r.need("cudaEventDestroy", a->event_destroy, why) &&
         r.need("cudaEventRecord", a->event_record, why) &&
         r.need("cudaEventQuery", a->event_query, why) &&
         r.need("cudaEventElapsedTime", a->event_elapsed_time, why);
}

// The driver alone (under l.mu): what ib's GPU registration needs, where a job's CUDA
// runtime may be one libzcx cannot find by name (NCCL links its own statically).
bool load_driver(Loaded& l, std::string* why) {
  if (l.driver_ready) return true;
  std::string drv = driver_library.get();
  if (!l.driver.open({drv.c_str()})) {
    if (why) *why = "no CUDA driver: " + l.driver.error();
    return false;
  }
  if (!resolve_driver(l.driver, &l.api, why)) {
    l.driver.reset();
    return false;
  }
  l.driver_ready = true;
  return true;
}

bool load_runtime(Loaded& l, std::string* why) {
  std::string rt = runtime_library.get();
  if (!l.runtime.open({rt.c_str()})) {
    if (why) *why = "no CUDA runtime: " + l.runtime.error();
    return false;
  }
  if (resolve_runtime_devices(l.runtime, &l.api, why) &&
      resolve_runtime_memory(l.runtime, &l.api, why) &&
      resolve_runtime_streams(l.runtime, &l.api, why))
    return true;
  l.runtime.reset();
  return false;
}

}  // namespace

const CudaApi* cuda_shim_load(std::string* why) {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mu);
  if (const CudaApi* api = l.ready.load()) return api;
  if (!load_driver(l, why) || !load_runtime(l, why)) return nullptr;
  l.ready.store(&l.api);
  ZCX_INFO(kLogCuda, "loaded %s and %s", l.driver.loaded_name().c_str(),
           l.runtime.loaded_name().c_str());
  return &l.api;
}

const CudaApi* cuda_shim() { return loaded().ready.load(); }

decltype(&::cuMemGetHandleForAddressRange) cuda_dmabuf_export(std::string* why) {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mu);
  if (!load_driver(l, why)) return nullptr;
  if (l.api.cu_mem_get_handle_for_address_range == nullptr && why != nullptr)
    *why = "the CUDA driver has no cuMemGetHandleForAddressRange (before CUDA 11.7)";
  return l.api.cu_mem_get_handle_for_address_range;
}

// Driver queries: they need no current context, so the check never makes one (a runtime
// query would bind the calling thread to device 0's primary context). A driver nobody
// initialised knows no device memory and answers an error: false.
bool cuda_is_device_memory(const void* p) {
  const CudaApi* api = cuda_shim();
  if (api == nullptr || p == nullptr) return false;
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  unsigned type = 0, managed = 0;
  return api->cu_pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, at) ==
             CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_DEVICE &&
         api->cu_pointer_get_attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, at) ==
             CUDA_SUCCESS &&
         managed == 0;
}

namespace {
// Whether p lies in memory mapped with cuMemMap (cuMemRetainAllocationHandle refuses others).
bool is_cumem_mapped(const CudaApi* api, CUdeviceptr p) {
  CUmemGenericAllocationHandle h{};
  if (api->cu_mem_retain_allocation_handle(&h, reinterpret_cast<void*>(p)) != CUDA_SUCCESS)
    return false;
  (void)api->cu_mem_release(h);
  return true;
}
}  // namespace

size_t cuda_allocations_spanned(const void* p, size_t bytes) {
  const CudaApi* api = cuda_shim();
  CUdeviceptr base = 0;
  size_t size = 0;
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  if (api == nullptr || api->cu_mem_get_address_range(&base, &size, at) != CUDA_SUCCESS)
    return 0;
  const CUdeviceptr end = at + std::max<size_t>(bytes, 1);
  size_t count = 1;
  if (base + size < end && !is_cumem_mapped(api, at)) return 0;
  // The next allocation must start where this one ends, and be mapped there too.
  for (CUdeviceptr next = base + size; next < end; next = base + size, ++count)
    if (api->cu_mem_get_address_range(&base, &size, next) != CUDA_SUCCESS || base != next ||
        !is_cumem_mapped(api, next))
      return 0;
  return count;
}

int cuda_device_count(std::string* why) {
  const CudaApi* api = cuda_shim_load(why);
  if (api == nullptr) return 0;
  int n = 0;
  cudaError_t e = api->get_device_count(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + api->get_error_string(e);
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA driver reports no device";
  return n;
}

std::string cuda_shim_describe() {
  std::string why;
  int n = cuda_device_count(&why);
  const CudaApi* api = cuda_shim();
  if (api == nullptr) return why;
  int drv = 0, rt = 0;
  if (api->cu_driver_get_version(&drv) != CUDA_SUCCESS) drv = 0;
  if (api->runtime_get_version(&rt) != cudaSuccess) rt = 0;
  char text[160];
  std::snprintf(text, sizeof text, "%d CUDA device%s (driver %d.%d, runtime %d.%d)", n,
                n == 1 ? "" : "s", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
  return n > 0 ? std::string(text) : "CUDA driver loaded, no device (" + why + ")";
}

Status cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::kSuccess;
  const CudaApi* api = cuda_shim();
  const char* name = api ? api->get_error_name(e) : "cudaError";
  const char* text = api ? api->get_error_string(e) : "CUDA runtime not loaded";
  Status s = e == cudaErrorMemoryAllocation ? Status::kNoMemory : Status::kSystem;
  return set_error(s, kLogCuda, "%s failed: %s (%d): %s", what, name, static_cast<int>(e), text);
}

Status cu_check(CUresult e, const char* what) {
  if (e == CUDA_SUCCESS) return Status::kSuccess;
  const CudaApi* api = cuda_shim();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api == nullptr || api->cu_get_error_name(e, &name) != CUDA_SUCCESS) name = "CUresult";
  if (api == nullptr || api->cu_get_error_string(e, &text) != CUDA_SUCCESS)
    text = "unknown CUDA driver error";
  Status s = e == CUDA_ERROR_OUT_OF_MEMORY ? Status::kNoMemory : Status::kSystem;
  return set_error(s, kLogCuda, "%s failed: %s (%d): %s", what, name, static_cast<int>(e), text);
}

CudaDeviceGuard::CudaDeviceGuard(int device) {
  const CudaApi* api = cuda_shim();
  if (api == nullptr) {
    status_ = set_error(Status::kNoDevice, kLogCuda, "CUDA is not loaded");
    return;
  }
  status_ = cuda_check(api->get_device(&previous_), "cudaGetDevice");
  if (ok(status_) && previous_ != device)
    status_ = cuda_check(api->set_device(device), "cudaSetDevice");
  else
    previous_ = -1;  // nothing to restore
}

CudaDeviceGuard::~CudaDeviceGuard() {
  const CudaApi* api = cuda_shim();
  if (api == nullptr || previous_ < 0) return;
  if (api->set_device(previous_) != cudaSuccess)
    ZCX_WARN(kLogCuda, "restoring CUDA device %d failed", previous_);
}

}  // namespace zcx
