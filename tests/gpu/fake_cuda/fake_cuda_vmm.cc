// The simulated runtime's virtual memory management (cuMem*), so that the cuda_ipc provider's
// VMM path (an allocation's POSIX fd passed over a Unix socket, imported and mapped by the
// peer) runs in CPU-only CI. An allocation is a memfd; its handle counts references as the
// driver's does (cuMemCreate, cuMemImportFromShareableHandle and cuMemRetainAllocationHandle
// take one, cuMemMap holds one until cuMemUnmap, cuMemRelease drops one; the memory goes with
// the last). A reservation is an inaccessible anonymous mapping; cuMemMap puts the memfd in
// its place, still inaccessible until cuMemSetAccess opens it to the device (and, as all
// device memory here, closes it to host code: fake_cuda_access.cc). Exporting gives a new fd
// of the memfd, which only an allocation created with the POSIX-fd handle type allows;
// importing takes any fd of a simulated allocation and refuses others. Unmapping waits for the
// whole device, the pessimistic choice (as closing a legacy IPC mapping does here).
// The granularity is 2 MiB, an H100's and H200's.
#include "fake_cuda.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string_view>

namespace {

using Handle = CUmemGenericAllocationHandle;
constexpr size_t kGranularity = size_t(2) << 20;
constexpr char kMemfdName[] = "zcx-fake-cuda-vmm";

struct Allocation {
  int fd = -1;
  size_t size = 0;
  int refs = 0;
  bool exportable = false;  // created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
};

std::mutex g_mu;
std::map<Handle, Allocation> g_handles;   // under g_mu
std::map<uintptr_t, size_t> g_reserved;   // reservations: base -> size, under g_mu
Handle g_next_handle = 1;                 // under g_mu

bool aligned(size_t v) { return v % kGranularity == 0; }

// Drops one reference of h; the memory goes with the last. Under g_mu.
CUresult unref_locked(Handle h) {
  auto it = g_handles.find(h);
  if (it == g_handles.end() || it->second.refs <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.refs == 0) {
    close(it->second.fd);
    g_handles.erase(it);
  }
  return CUDA_SUCCESS;
}

// Whether [p, p + size) lies inside one reservation. Under g_mu.
bool reserved_locked(uintptr_t p, size_t size) {
  auto it = g_reserved.upper_bound(p);
  if (it == g_reserved.begin()) return false;
  --it;
  return p >= it->first && p + size <= it->first + it->second;
}

Handle new_handle_locked(int fd, size_t size, bool exportable) {
  const Handle h = g_next_handle++;
  g_handles[h] = Allocation{fd, size, 1, exportable};
  return h;
}

// Whether fd is a memfd this runtime made for an allocation (in any process).
bool is_simulated_allocation(int fd) {
  char link[64], target[128];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  const std::string_view name(target);
  return name.starts_with("/memfd:") && name.substr(7).starts_with(kMemfdName);
}

}  // namespace

// For tests: how many allocation handles are live in this process (created, imported or
// retained, and not yet released; a mapping holds one too).
FAKE_API long fake_cuda_vmm_references() {
  std::lock_guard<std::mutex> lock(g_mu);
  long n = 0;
  for (const auto& [h, a] : g_handles) n += a.refs;
  return n;
}

FAKE_API CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop,
                                                CUmemAllocationGranularity_flags) {
  if (g == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *g = kGranularity;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemCreate(Handle* h, size_t size, const CUmemAllocationProp* prop,
                              unsigned long long flags) {
  if (!fake_cuda_initialise()) return CUDA_ERROR_NOT_INITIALIZED;
  if (h == nullptr || prop == nullptr || flags != 0 || size == 0 || !aligned(size))
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  const int fd = memfd_create(kMemfdName, MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const bool exportable = prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  std::lock_guard<std::mutex> lock(g_mu);
  *h = new_handle_locked(fd, size, exportable);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemRelease(Handle h) {
  std::lock_guard<std::mutex> lock(g_mu);
  return unref_locked(h);
}

FAKE_API CUresult cuMemRetainAllocationHandle(Handle* h, void* addr) {
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Handle mapped = fake_cuda_mapping_at(addr, 1);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_handles.find(mapped);
  if (mapped == 0 || it == g_handles.end()) return CUDA_ERROR_INVALID_VALUE;
  ++it->second.refs;
  *h = mapped;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, Handle h) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_handles.find(h);
  if (prop == nullptr || it == g_handles.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = CUmemAllocationProp{};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = 0;
  prop->requestedHandleTypes =
      it->second.exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  return CUDA_SUCCESS;
}

// The caller owns the new fd (and closes it), as with the driver's.
FAKE_API CUresult cuMemExportToShareableHandle(void* out, Handle h,
                                               CUmemAllocationHandleType type,
                                               unsigned long long flags) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_handles.find(h);
  if (out == nullptr || flags != 0 || it == g_handles.end()) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !it->second.exportable)
    return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(out) = fd;
  return CUDA_SUCCESS;
}

// The driver keeps no hold on the fd it is given: the caller still closes it.
FAKE_API CUresult cuMemImportFromShareableHandle(Handle* h, void* os_handle,
                                                 CUmemAllocationHandleType type) {
  if (!fake_cuda_initialise()) return CUDA_ERROR_NOT_INITIALIZED;
  const int given = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
  if (h == nullptr || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
      !is_simulated_allocation(given))
    return CUDA_ERROR_INVALID_VALUE;
  struct stat st {};
  if (fstat(given, &st) != 0 || st.st_size <= 0 || !aligned(static_cast<size_t>(st.st_size)))
    return CUDA_ERROR_INVALID_VALUE;
  const int fd = fcntl(given, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  *h = new_handle_locked(fd, static_cast<size_t>(st.st_size), true);
  return CUDA_SUCCESS;
}

// Reserved at the granularity's alignment (what the driver gives for alignment 0 or less);
// a fixed address is not simulated.
FAKE_API CUresult cuMemAddressReserve(CUdeviceptr* p, size_t size, size_t align, CUdeviceptr addr,
                                      unsigned long long flags) {
  if (p == nullptr || size == 0 || !aligned(size) || addr != 0 || flags != 0 ||
      align > kGranularity)
    return CUDA_ERROR_INVALID_VALUE;
  const size_t span = size + kGranularity;
  void* m = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto raw = reinterpret_cast<uintptr_t>(m);
  const uintptr_t base = (raw + kGranularity - 1) / kGranularity * kGranularity;
  if (base > raw) munmap(m, base - raw);
  munmap(reinterpret_cast<void*>(base + size), raw + span - (base + size));
  std::lock_guard<std::mutex> lock(g_mu);
  g_reserved[base] = size;
  *p = base;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAddressFree(CUdeviceptr p, size_t size) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_reserved.find(p);
  if (it == g_reserved.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  g_reserved.erase(it);
  munmap(reinterpret_cast<void*>(p), size);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, Handle h,
                           unsigned long long flags) {
  if (flags != 0 || size == 0 || !aligned(p) || !aligned(size) || !aligned(offset))
    return CUDA_ERROR_INVALID_VALUE;
  if (fake_cuda_mapping_at(reinterpret_cast<void*>(p), 1) != 0) return CUDA_ERROR_ALREADY_MAPPED;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_handles.find(h);
  if (it == g_handles.end() || offset + size > it->second.size || !reserved_locked(p, size))
    return CUDA_ERROR_INVALID_VALUE;
  void* m = mmap(reinterpret_cast<void*>(p), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 it->second.fd, static_cast<off_t>(offset));
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  ++it->second.refs;
  fake_cuda_record_mapping(m, size, h);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemUnmap(CUdeviceptr p, size_t size) {
  fake_cuda_sync_device();
  const Handle h = fake_cuda_forget_mapping(reinterpret_cast<void*>(p), size);
  if (h == 0) return CUDA_ERROR_INVALID_VALUE;
  // Back to an inaccessible part of its reservation.
  (void)mmap(reinterpret_cast<void*>(p), size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  std::lock_guard<std::mutex> lock(g_mu);
  return unref_locked(h);
}

// Read-write access for device 0 (zcx's and the tests' only use); the host stays shut out.
FAKE_API CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc* desc,
                                 size_t count) {
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  if (fake_cuda_mapping_at(reinterpret_cast<void*>(p), size) == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id != 0)
      return CUDA_ERROR_INVALID_DEVICE;
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_NOT_SUPPORTED;
  }
  // Opened, then closed to host code where protection keys exist.
  if (mprotect(reinterpret_cast<void*>(p), size, PROT_READ | PROT_WRITE) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  fake_cuda_guard(reinterpret_cast<void*>(p), size);
  return CUDA_SUCCESS;
}
