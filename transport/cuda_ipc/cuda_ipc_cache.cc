// Imported peer allocations, process-wide (a legacy IPC handle can be opened only once per
// process, so two comms from the same peer must share the mapping). Keyed by the exporter's
// pid, allocation base and buffer id: a base the peer freed and reallocated comes with a new
// buffer id, and the stale mapping is dropped when it is no longer in use.
#include "common/log.h"
#include "cuda_ipc/cuda_ipc.h"

#include <cstring>
#include <mutex>

namespace zcx::cuda_ipc {
namespace {

struct Entry {
  int pid = 0;
  Export e;
  uint8_t* local = nullptr;
  CUmemGenericAllocationHandle vmm{};
  int refs = 0;
};

struct Cache {
  std::mutex mu;
  std::vector<Entry> entries;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: mappings may outlive static teardown
  return *c;
}

void unmap(const CudaApi* api, Entry& en) {
  if (en.e.kind == ExportKind::kLegacy) {
    if (api->ipc_close_mem_handle(en.local) != cudaSuccess)
      ZCX_WARN(kLogCuda, "cuda_ipc: cudaIpcCloseMemHandle for pid %d failed", en.pid);
    return;
  }
  auto p = reinterpret_cast<CUdeviceptr>(en.local);
  if (api->cu_mem_unmap(p, en.e.size) != CUDA_SUCCESS ||
      api->cu_mem_address_free(p, en.e.size) != CUDA_SUCCESS ||
      api->cu_mem_release(en.vmm) != CUDA_SUCCESS)
    ZCX_WARN(kLogCuda, "cuda_ipc: unmapping a cuMem import of pid %d failed", en.pid);
}

Status map_vmm(const CudaApi* api, int device, int fd, Entry* en) {
  if (fd < 0)
    return set_error(Status::kProtocol, kLogCuda, "cuda_ipc: cuMem POST from pid %d without fd",
                     en->pid);
  ZCX_CUCHECK(api->cu_mem_import_from_shareable_handle(
      &en->vmm, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  CUdeviceptr p = 0;
  CUresult r = api->cu_mem_address_reserve(&p, en->e.size, 0, 0, 0);
  if (r == CUDA_SUCCESS) r = api->cu_mem_map(p, en->e.size, 0, en->vmm, 0);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (r == CUDA_SUCCESS) r = api->cu_mem_set_access(p, en->e.size, &access, 1);
  if (r != CUDA_SUCCESS) {
    if (p != 0) {
      (void)api->cu_mem_unmap(p, en->e.size);
      (void)api->cu_mem_address_free(p, en->e.size);
    }
    (void)api->cu_mem_release(en->vmm);
    return cu_check(r, "cuMemAddressReserve/cuMemMap/cuMemSetAccess of a peer allocation");
  }
  en->local = reinterpret_cast<uint8_t*>(p);
  return Status::kSuccess;
}

Status map_entry(int device, int fd, Entry* en) {
  const CudaApi* api = cuda_shim();
  CudaDeviceGuard guard(device);
  ZCX_TRY(guard.status());
  if (en->e.kind == ExportKind::kVmm) return map_vmm(api, device, fd, en);
  cudaIpcMemHandle_t h;
  std::memcpy(&h, en->e.legacy, sizeof(h));
  void* p = nullptr;
  ZCX_CUDACHECK(api->ipc_open_mem_handle(&p, h, cudaIpcMemLazyEnablePeerAccess));
  en->local = static_cast<uint8_t*>(p);
  return Status::kSuccess;
}

bool same(const Entry& en, int pid, const Export& e) {
  return en.pid == pid && en.e.base == e.base && en.e.buffer_id == e.buffer_id;
}

// Unreferenced entries of `pid` that overlap e's range belong to freed allocations.
void drop_stale(const CudaApi* api, std::vector<Entry>& v, int pid, const Export& e) {
  for (size_t i = 0; i < v.size();) {
    Entry& en = v[i];
    bool overlap = en.e.base < e.base + e.size && e.base < en.e.base + en.e.size;
    if (en.pid == pid && en.refs == 0 && overlap && !same(en, pid, e)) {
      unmap(api, en);
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

}  // namespace

Status cache_acquire(int pid, int device, const Export& e, int fd, uint8_t** base) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (Entry& en : c.entries)
    if (same(en, pid, e)) {
      ++en.refs;
      *base = en.local;
      return Status::kSuccess;
    }
  drop_stale(cuda_shim(), c.entries, pid, e);
  Entry en;
  en.pid = pid;
  en.e = e;
  ZCX_TRY(map_entry(device, fd, &en));
  en.refs = 1;
  *base = en.local;
  c.entries.push_back(en);
  return Status::kSuccess;
}

void cache_release(int pid, const Export& e) {
  static const bool keep = cfg_cache_enabled();  // read once, not per completed send
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (size_t i = 0; i < c.entries.size(); ++i) {
    Entry& en = c.entries[i];
    if (!same(en, pid, e)) continue;
    if (--en.refs == 0 && !keep) {
      unmap(cuda_shim(), en);
      c.entries.erase(c.entries.begin() + static_cast<std::ptrdiff_t>(i));
    }
    return;
  }
}

void cache_forget(int pid) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (size_t i = 0; i < c.entries.size();) {
    if (c.entries[i].pid == pid && c.entries[i].refs == 0) {
      unmap(cuda_shim(), c.entries[i]);
      c.entries.erase(c.entries.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

}  // namespace zcx::cuda_ipc
