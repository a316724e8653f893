// Exporting a local receive buffer: the allocation that holds it, as a legacy CUDA IPC handle
// (cudaMalloc memory) or as a POSIX fd of its cuMem allocation handle (VMM memory, which
// legacy IPC cannot export). The importer maps the whole allocation and adds the offset. A
// buffer over several cuMem allocations, or in one made without the POSIX-fd handle type, is
// exported as "host" (the sender passes a memfd).
// Legacy handles are kept per allocation (base and buffer id, which CUDA never repeats for a
// new allocation at the same address): a receive into a buffer exported before costs no
// cudaIpcGetMemHandle, as UCX and NCCL keep theirs.
#include "common/log.h"
#include "cuda_ipc/cuda_ipc.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <string>

namespace zcx::cuda_ipc {
namespace {

// What the sender cannot map comes through host memory (kHost); `said` makes each reason an
// INFO line once per process.
Status export_host(const void* data, size_t bytes, std::once_flag& said, const std::string& why,
                   Export* out) {
  std::call_once(said, [&] {
    ZCX_INFO(kLogCuda, "cuda_ipc: %s; such receives come through host memory", why.c_str());
  });
  *out = Export{};
  out->kind = ExportKind::kHost;
  out->base = reinterpret_cast<uintptr_t>(data);
  out->size = bytes;
  return Status::kSuccess;
}

// VMM memory: cuMemRetainAllocationHandle succeeds only on cuMemMap'ped addresses. Only an
// allocation created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR among its
// requestedHandleTypes exports as an fd; others go through host memory.
Status export_vmm(const CudaApi* api, CUmemGenericAllocationHandle h, const void* data,
                  size_t bytes, Export* out, UniqueFd* fd) {
  int f = -1;
  CUresult r = api->cu_mem_export_to_shareable_handle(
      &f, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  (void)api->cu_mem_release(h);  // drops the reference Retain took
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (api->cu_get_error_name(r, &name) != CUDA_SUCCESS) name = "an error";
    static std::once_flag said;
    return export_host(data, bytes, said,
                       std::string("cuMemExportToShareableHandle(POSIX_FILE_DESCRIPTOR) of a "
                                   "receive buffer's cuMem allocation returned ") + name +
                           " (made without that requestedHandleType?)", out);
  }
  fd->reset(f);
  out->kind = ExportKind::kVmm;
  return Status::kSuccess;
}

// The last kLegacyKept legacy exports, newest at the front.
constexpr size_t kLegacyKept = 64;
std::mutex g_legacy_mu;
std::deque<Export>& legacy_exports() {
  static auto* kept = new std::deque<Export>();  // outlives static teardown
  return *kept;
}

bool legacy_known(Export* out) {
  std::lock_guard<std::mutex> lock(g_legacy_mu);
  for (const Export& e : legacy_exports())
    if (e.base == out->base && e.buffer_id == out->buffer_id && e.size == out->size) {
      std::memcpy(out->legacy, e.legacy, sizeof(out->legacy));
      out->kind = ExportKind::kLegacy;
      return true;
    }
  return false;
}

Status export_legacy(const CudaApi* api, Export* out) {
  cudaIpcMemHandle_t h;
  static_assert(sizeof(h) == sizeof(out->legacy));
  ZCX_CUDACHECK(api->ipc_get_mem_handle(&h, reinterpret_cast<void*>(out->base)));
  std::memcpy(out->legacy, &h, sizeof(h));
  out->kind = ExportKind::kLegacy;
  std::lock_guard<std::mutex> lock(g_legacy_mu);
  std::deque<Export>& kept = legacy_exports();
  kept.push_front(*out);
  if (kept.size() > kLegacyKept) kept.pop_back();
  return Status::kSuccess;
}

// A buffer past the end of its allocation: cuMem allocations mapped back to back, which no
// one handle exports, go through host memory; anything else is a caller's error.
Status export_spanning(const void* data, size_t bytes, Export* out) {
  const size_t n = cuda_allocations_spanned(data, bytes);
  if (n == 0)
    return set_error(Status::kInvalidArg, kLogCuda,
                     "cuda_ipc: receive buffer %p of %zu bytes runs past the end of its "
                     "allocation", data, bytes);
  static std::once_flag said;
  return export_host(data, bytes, said,
                     "a receive buffer spans " + std::to_string(n) +
                         " cuMem allocations mapped back to back (expandable segments)", out);
}

}  // namespace

Status export_buffer(const void* data, size_t bytes, Export* out, UniqueFd* fd) {
  const CudaApi* api = cuda_shim();
  if (api == nullptr) return set_error(Status::kNoDevice, kLogCuda, "cuda_ipc: CUDA not loaded");
  auto ptr = reinterpret_cast<CUdeviceptr>(data);
  CUdeviceptr base = 0;
  size_t size = 0;
  ZCX_CUCHECK(api->cu_mem_get_address_range(&base, &size, ptr));
  if (bytes > size - (ptr - base)) return export_spanning(data, bytes, out);
  unsigned long long id = 0;
  ZCX_CUCHECK(api->cu_pointer_get_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr));
  out->base = base;
  out->size = size;
  out->offset = ptr - base;
  out->buffer_id = id;
  if (legacy_known(out)) return Status::kSuccess;  // (offset is per buffer: set above)
  CUmemGenericAllocationHandle h{};
  if (api->cu_mem_retain_allocation_handle(&h, const_cast<void*>(data)) == CUDA_SUCCESS)
    return export_vmm(api, h, data, bytes, out, fd);
  return export_legacy(api, out);
}

}  // namespace zcx::cuda_ipc
