// Imported peer allocations, process-wide (a legacy IPC handle can be opened only once per
// process, so two comms from the same peer must share the mapping). Keyed by the exporter's
// pid, allocation base and buffer id: a base the peer freed and reallocated comes with a new
// buffer id, and the stale mapping is dropped when it is no longer in use.
//
// Closing a mapping may wait for the whole device, so it never happens under the cache's
// lock and goes through gpu_hold::run_or_defer: while an asynchronous stream-ordered call
// holds a stream (its progress thread is the one importing here), closes wait for the next
// call's caller (common/gpu_hold.h). A driver may refuse to open a reused range until the old
// mapping closes: with no hold live that close is done at once (close_now, outside the lock
// all the same); with one live, nothing is mapped and the provider sends through host memory.
#include "common/gpu_hold.h"
#include "common/log.h"
#include "cuda_ipc/cuda_ipc.h"

#include <cstring>
#include <mutex>

namespace zcx::cuda_ipc {
namespace {

struct Entry {
  int pid = 0;
  int device = -1;  // where it is mapped
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

void unmap(const CudaApi* api, const Entry& en) {
  CudaDeviceGuard guard(en.device);  // closes may run on another thread than the import
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

// Closes the mappings now, or once no stream hold is live. Called without the cache's lock.
void retire(std::vector<Entry> gone) {
  for (const Entry& en : gone) gpu_hold::run_or_defer([en] { unmap(cuda_shim(), en); });
}

// fd: the POST's descriptor for this allocation (post_read makes sure there is one).
Status map_vmm(const CudaApi* api, int device, int fd, Entry* en) {
  ZCX_TRY(cu_check(api->cu_mem_import_from_shareable_handle(
                       &en->vmm, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                   "cuMemImportFromShareableHandle of the fd in the peer's POST"));
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

// The driver may refuse the handle of a reused range while the old mapping of that range is
// open (CUDA_ERROR_ALREADY_MAPPED; UCX's cuda_ipc cache meets the same code): `refused`, when
// given, is then set and the caller closes the stale mappings and tries again.
Status map_legacy(const CudaApi* api, Entry* en, bool* refused) {
  cudaIpcMemHandle_t h;
  std::memcpy(&h, en->e.legacy, sizeof(h));
  void* p = nullptr;
  cudaError_t r = api->ipc_open_mem_handle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  if (r == cudaErrorAlreadyMapped && refused != nullptr) {
    *refused = true;
    return Status::kSuccess;
  }
  ZCX_TRY(cuda_check(r, "cudaIpcOpenMemHandle"));
  en->local = static_cast<uint8_t*>(p);
  return Status::kSuccess;
}

Status map_entry(int device, int fd, Entry* en, bool* refused) {
  const CudaApi* api = cuda_shim();
  CudaDeviceGuard guard(device);
  ZCX_TRY(guard.status());
  en->device = device;
  if (en->e.kind == ExportKind::kVmm) return map_vmm(api, device, fd, en);
  return map_legacy(api, en, refused);
}

bool same(const Entry& en, int pid, const Export& e) {
  return en.pid == pid && en.e.base == e.base && en.e.buffer_id == e.buffer_id;
}

// Takes the unreferenced entries of `pid` that overlap e's range (freed allocations) out of v.
std::vector<Entry> take_stale(std::vector<Entry>& v, int pid, const Export& e) {
  std::vector<Entry> out;
  for (size_t i = 0; i < v.size();) {
    Entry& en = v[i];
    bool overlap = en.e.base < e.base + e.size && e.base < en.e.base + en.e.size;
    if (en.pid == pid && en.refs == 0 && overlap && !same(en, pid, e)) {
      out.push_back(en);
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return out;
}

// Finds or maps e; the entries it displaces go to `stale`. Sets `refused` (when given) and
// maps nothing when the driver refuses the range until a stale mapping closes.
Status acquire_locked(Cache& c, int pid, int device, const Export& e, int fd, uint8_t** base,
                      std::vector<Entry>* stale, bool* refused) {
  for (Entry& en : c.entries)
    if (same(en, pid, e)) {
      ++en.refs;
      *base = en.local;
      return Status::kSuccess;
    }
  *stale = take_stale(c.entries, pid, e);
  Entry en;
  en.pid = pid;
  en.e = e;
  ZCX_TRY(map_entry(device, fd, &en, refused));
  if (refused != nullptr && *refused) return Status::kSuccess;
  en.refs = 1;
  *base = en.local;
  c.entries.push_back(en);
  return Status::kSuccess;
}

// The stale mappings, and closes deferred earlier, done here and now whatever wait that
// costs: the import cannot go on without them.
void close_now(const std::vector<Entry>& stale, int pid) {
  ZCX_INFO(kLogCuda, "cuda_ipc: pid %d reuses a range still mapped here: closing the old "
           "mapping before opening the new one", pid);
  for (const Entry& old : stale) unmap(cuda_shim(), old);
  gpu_hold::run_deferred_now();
}

// The close would wait for the held stream, whose hold waits for this very transfer: rather
// than stall until ZCX_GPU_STREAM_TIMEOUT, nothing is mapped (the transfer goes through host
// memory) and the old mapping closes before the next stream-ordered call (gpu_hold's queue).
void refused_under_hold(std::vector<Entry> stale, int pid, uint8_t** base) {
  ZCX_INFO(kLogCuda, "cuda_ipc: pid %d reuses a range still mapped here while a stream is "
           "held: this transfer goes through host memory, the old mapping closes later", pid);
  retire(std::move(stale));
  *base = nullptr;
}

}  // namespace

Status cache_acquire(int pid, int device, const Export& e, int fd, uint8_t** base) {
  Cache& c = cache();
  for (bool first = true;; first = false) {
    std::vector<Entry> stale;
    bool refused = false;
    Status st;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      st = acquire_locked(c, pid, device, e, fd, base, &stale, first ? &refused : nullptr);
    }
    if (!refused) {
      retire(std::move(stale));
      return st;
    }
    if (gpu_hold::live()) {
      refused_under_hold(std::move(stale), pid, base);
      return Status::kSuccess;
    }
    close_now(stale, pid);  // outside the lock, then once more
  }
}

void cache_release(int pid, const Export& e) {
  static const bool keep = cfg_cache_enabled();  // read once, not per completed send
  Cache& c = cache();
  std::vector<Entry> gone;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    for (size_t i = 0; i < c.entries.size(); ++i) {
      Entry& en = c.entries[i];
      if (!same(en, pid, e)) continue;
      if (--en.refs == 0 && !keep) {
        gone.push_back(en);
        c.entries.erase(c.entries.begin() + static_cast<std::ptrdiff_t>(i));
      }
      break;
    }
  }
  retire(std::move(gone));
}

void cache_forget(int pid) {
  Cache& c = cache();
  std::vector<Entry> gone;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    for (size_t i = 0; i < c.entries.size();) {
      if (c.entries[i].pid == pid && c.entries[i].refs == 0) {
        gone.push_back(c.entries[i]);
        c.entries.erase(c.entries.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  retire(std::move(gone));
}

}  // namespace zcx::cuda_ipc
