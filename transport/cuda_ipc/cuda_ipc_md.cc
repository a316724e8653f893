// Exporting a local receive buffer: the allocation that holds it, as a legacy CUDA IPC handle
// (cudaMalloc memory) or as a POSIX fd of its cuMem allocation handle (VMM memory, which
// legacy IPC cannot export). The importer maps the whole allocation and adds the offset. A
// buffer over several cuMem allocations mapped back to back (PyTorch's expandable segments)
// is exported one allocation at a time, up to kMaxPieces of them; beyond that, or in a cuMem
// allocation made without the POSIX-fd handle type, it is exported as "host" (the sender
// passes the bytes in a memfd).
// Legacy handles are kept per allocation (base and buffer id, which CUDA never repeats for a
// new allocation at the same address): a receive into a buffer exported before costs no
// cudaIpcGetMemHandle, as UCX and NCCL keep theirs. A VMM fd is made afresh for each receive
// and closed once sent: an open shareable fd counts as a reference to the allocation, so a
// kept one would hold its memory here after the application unmaps and releases it. (The
// sender's import holds such a reference for as long as its cache keeps the mapping.)
#include "common/log.h"
#include "cuda_ipc/cuda_ipc.h"

#include <cstring>
#include <deque>
#include <mutex>

namespace zcx::cuda_ipc {
namespace {

// What the sender cannot map comes through host memory: one piece of kind kHost.
Status export_host(const void* data, size_t bytes, PostedBuffer* out) {
  Export e;
  e.kind = ExportKind::kHost;
  e.base = reinterpret_cast<uintptr_t>(data);
  e.size = bytes;
  out->pieces.assign(1, e);
  out->fds.clear();
  return Status::kSuccess;
}

// VMM memory: cuMemRetainAllocationHandle succeeds only on cuMemMap'ped addresses. Only an
// allocation created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR among its
// requestedHandleTypes exports as an fd; for others *exportable turns false.
Status export_vmm(const CudaApi* api, CUmemGenericAllocationHandle h, Export* out,
                  UniqueFd* fd, bool* exportable) {
  int f = -1;
  CUresult r = api->cu_mem_export_to_shareable_handle(
      &f, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  (void)api->cu_mem_release(h);  // drops the reference Retain took
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (api->cu_get_error_name(r, &name) != CUDA_SUCCESS) name = "an error";
    static std::once_flag said;
    std::call_once(said, [&] {
      ZCX_INFO(kLogCuda, "cuda_ipc: cuMemExportToShareableHandle(POSIX_FILE_DESCRIPTOR) of a "
               "receive buffer's cuMem allocation returned %s (made without that "
               "requestedHandleType?); such receives come through host memory", name);
    });
    *exportable = false;
    return Status::kSuccess;
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

// The allocation that holds `at`, from `at` on: a legacy handle (made once per allocation)
// or a VMM fd; *exportable turns false for a cuMem allocation that cannot export one.
Status export_allocation(const CudaApi* api, CUdeviceptr at, Export* out, UniqueFd* fd,
                         bool* exportable) {
  CUdeviceptr base = 0;
  size_t size = 0;
  ZCX_CUCHECK(api->cu_mem_get_address_range(&base, &size, at));
  unsigned long long id = 0;
  ZCX_CUCHECK(api->cu_pointer_get_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, at));
  out->base = base;
  out->size = size;
  out->offset = at - base;
  out->buffer_id = id;
  if (legacy_known(out)) return Status::kSuccess;  // (offset is per buffer: set above)
  CUmemGenericAllocationHandle h{};
  if (api->cu_mem_retain_allocation_handle(&h, reinterpret_cast<void*>(at)) == CUDA_SUCCESS)
    return export_vmm(api, h, out, fd, exportable);
  return export_legacy(api, out);
}

// How many allocations the buffer spans, or an error when it runs past its allocation into
// anything but cuMem allocations mapped back to back.
Status count_allocations(const void* data, size_t bytes, size_t* n) {
  *n = cuda_allocations_spanned(data, bytes);
  if (*n == 0)
    return set_error(Status::kInvalidArg, kLogCuda,
                     "cuda_ipc: receive buffer %p of %zu bytes runs past the end of its "
                     "allocation", data, bytes);
  return Status::kSuccess;
}

}  // namespace

Status export_buffer(const void* data, size_t bytes, PostedBuffer* out) {
  const CudaApi* api = cuda_shim();
  if (api == nullptr) return set_error(Status::kNoDevice, kLogCuda, "cuda_ipc: CUDA not loaded");
  const auto ptr = reinterpret_cast<CUdeviceptr>(data);
  out->pieces.clear();
  out->fds.clear();
  size_t n = 1;
  for (CUdeviceptr at = ptr; at < ptr + bytes;) {
    Export e;
    UniqueFd fd;
    bool exportable = true;
    ZCX_TRY(export_allocation(api, at, &e, &fd, &exportable));
    if (!exportable) return export_host(data, bytes, out);  // export_vmm said why
    out->pieces.push_back(e);
    if (fd.valid()) out->fds.push_back(std::move(fd));
    at = e.base + e.size;
    if (out->pieces.size() == 1 && at < ptr + bytes) {
      ZCX_TRY(count_allocations(data, bytes, &n));
      if (n <= kMaxPieces) continue;
      static std::once_flag said;
      std::call_once(said, [&] {
        ZCX_INFO(kLogCuda, "cuda_ipc: a receive buffer spans %zu cuMem allocations, more than "
                 "the %zu one POST carries; such receives come through host memory", n,
                 kMaxPieces);
      });
      return export_host(data, bytes, out);
    }
  }
  return Status::kSuccess;
}

}  // namespace zcx::cuda_ipc
