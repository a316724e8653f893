// Multi-process helpers for the cuda_ipc test and bench: forked ranks sharing the GPUs,
// handles exchanged through a shared anonymous board, device buffers allocated with cudaMalloc
// (legacy IPC) or with cuMemCreate + POSIX-fd handle type (VMM), whole or in segments.
#pragma once

#include "base/provider.h"
#include "base/registry.h"
#include "common/clock.h"
#include "common/fork_ranks.h"
#include "common/fork_shared.h"
#include "common/dl/cuda_shim.h"
#include "common/socket.h"
#include "common/status.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace zcx::gpu_test {

inline constexpr int kMaxRanks = 4;

inline const zcx_provider_ops_t* ipc_ops() { return provider_find("cuda_ipc"); }

struct Board {
  uint8_t handle[kMaxRanks][kMaxRanks][ZCX_HANDLE_BYTES];  // [listener][connector]
  std::atomic<int> published;
  std::atomic<int> arrived;
  char error[kMaxRanks][256];
};

inline int fail(Board* b, int rank, const std::string& what) {
  std::snprintf(b->error[rank], sizeof(b->error[rank]), "rank %d: %s (%s)", rank, what.c_str(),
                last_error());
  return 1;
}

// Simple barrier over the board (each use needs its own generation).
inline bool board_barrier(Board* b, int n, int generation, int ms = 30000) {
  b->arrived.fetch_add(1);
  Deadline dl = Deadline::after_ms(ms);
  while (b->arrived.load() < n * generation)
    if (dl.expired()) return false;
  return true;
}

struct Mesh {
  void* ctx = nullptr;
  void* lc[kMaxRanks] = {};
  void* sc[kMaxRanks] = {};
  void* rc[kMaxRanks] = {};
  int n = 0;
  ~Mesh() {
    for (int j = 0; j < n; ++j) {
      if (sc[j] != nullptr) (void)ipc_ops()->close_send(sc[j]);
      if (rc[j] != nullptr) (void)ipc_ops()->close_recv(rc[j]);
      if (lc[j] != nullptr) (void)ipc_ops()->close_listen(lc[j]);
    }
    if (ctx != nullptr) (void)ipc_ops()->finalize(ctx);
  }
};

inline bool mesh_connect(Board* b, int rank, int n, int dev, Mesh* m) {
  zcx_provider_init_t self{};
  self.size = sizeof self;
  self.rank = rank;
  self.nranks = n;
  self.secret = 0x5eed;
  std::snprintf(self.host, sizeof self.host, "%s", local_host_name().c_str());
  m->n = n;
  if (ipc_ops()->init(&self, &m->ctx) != ZCX_SUCCESS) return fail(b, rank, "init"), false;
  for (int j = 0; j < n; ++j)
    if (j != rank && ipc_ops()->listen(m->ctx, dev, b->handle[rank][j], &m->lc[j]) != ZCX_SUCCESS)
      return fail(b, rank, "listen"), false;
  b->published.fetch_add(1);
  Deadline dl = Deadline::after_ms(30000);
  while (b->published.load() < n)
    if (dl.expired()) return fail(b, rank, "peers never published handles"), false;
  for (int left = 2 * (n - 1); left > 0;) {
    if (dl.expired()) return fail(b, rank, "connection set-up timed out"), false;
    for (int j = 0; j < n; ++j) {
      if (j == rank) continue;
      if (m->sc[j] == nullptr) {
        if (ipc_ops()->connect(m->ctx, dev, b->handle[j][rank], &m->sc[j]) != ZCX_SUCCESS)
          return fail(b, rank, "connect"), false;
        left -= m->sc[j] != nullptr;
      }
      if (m->rc[j] == nullptr) {
        if (ipc_ops()->accept(m->lc[j], &m->rc[j]) != ZCX_SUCCESS)
          return fail(b, rank, "accept"), false;
        left -= m->rc[j] != nullptr;
      }
    }
  }
  return true;
}

// Polls every request to completion (bounded); sizes[i] gets each request's size.
inline bool wait_all(std::vector<void*>& reqs, std::vector<size_t>* sizes, int ms = 60000) {
  Deadline dl = Deadline::after_ms(ms);
  if (sizes) sizes->assign(reqs.size(), 0);
  for (size_t left = reqs.size(); left > 0;) {
    if (dl.expired()) return false;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i] == nullptr) continue;
      int done = 0;
      size_t sz = 0;
      if (ipc_ops()->test(reqs[i], &done, &sz) != ZCX_SUCCESS) return false;
      if (!done) continue;
      if (sizes) (*sizes)[i] = sz;
      reqs[i] = nullptr;
      --left;
    }
  }
  return true;
}

// kVmmSegments: one cuMem allocation per granularity (2 MiB on an H100), mapped back to back
// in one reserved range, as PyTorch's expandable segments map theirs. kVmmNoFd: one cuMem
// allocation made without the POSIX-fd handle type (which cuda_ipc carries through host
// memory).
enum class Alloc { kCudaMalloc, kVmm, kVmmSegments, kVmmNoFd };

inline const char* alloc_name(Alloc kind) {
  static const char* const kNames[] = {"cudamalloc", "vmm", "vmmsegments", "vmmnofd"};
  return kNames[static_cast<int>(kind)];
}

// What gtest prints for an allocator (and ctest's test names carry), rather than its bytes.
inline void PrintTo(Alloc kind, std::ostream* os) { *os << alloc_name(kind); }

// A device buffer.
class DeviceBuffer {
 public:
  DeviceBuffer(Alloc kind, int dev, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint8_t* data() const { return ptr_; }
  bool ok() const { return ptr_ != nullptr || bytes_ == 0; }

 private:
  void map_vmm(int dev, bool segments, CUmemAllocationHandleType types);
  Alloc kind_;
  size_t bytes_ = 0;
  uint8_t* ptr_ = nullptr;
  CUdeviceptr range_ = 0;  // VMM: the reserved range, its size, what is mapped of it
  size_t reserved_ = 0, mapped_ = 0, piece_ = 0;
  std::vector<CUmemGenericAllocationHandle> handles_;
};

inline DeviceBuffer::DeviceBuffer(Alloc kind, int dev, size_t bytes)
    : kind_(kind), bytes_(bytes) {
  if (bytes == 0) return;
  if (kind != Alloc::kCudaMalloc) {
    map_vmm(dev, kind == Alloc::kVmmSegments,
            kind == Alloc::kVmmNoFd ? CU_MEM_HANDLE_TYPE_NONE
                                    : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    return;
  }
  void* p = nullptr;
  if (cuda_shim()->mem_alloc(&p, bytes) == cudaSuccess) ptr_ = static_cast<uint8_t*>(p);
}

// Pinned device memory on `dev` for cuMemCreate.
inline CUmemAllocationProp vmm_prop(int dev, CUmemAllocationHandleType types) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = types;
  return prop;
}

// The minimum cuMem granularity on `dev` (a kVmmSegments segment; 2 MiB on an H100), 0 when
// the driver does not say.
inline size_t vmm_granularity(
    int dev, CUmemAllocationHandleType types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
  const CUmemAllocationProp prop = vmm_prop(dev, types);
  size_t gran = 0;
  if (cuda_shim()->cu_mem_get_allocation_granularity(&gran, &prop,
                                                     CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
      CUDA_SUCCESS)
    return 0;
  return gran;
}

// Leaves ptr_ null on failure; the destructor undoes whatever was done.
inline void DeviceBuffer::map_vmm(int dev, bool segments, CUmemAllocationHandleType types) {
  const CudaApi* api = cuda_shim();
  const CUmemAllocationProp prop = vmm_prop(dev, types);
  const size_t gran = vmm_granularity(dev, types);
  if (gran == 0) return;
  const size_t want = (bytes_ + gran - 1) / gran * gran;
  piece_ = segments ? gran : want;
  if (api->cu_mem_address_reserve(&range_, want, 0, 0, 0) != CUDA_SUCCESS) return;
  reserved_ = want;
  for (size_t at = 0; at < want; at += piece_) {
    handles_.emplace_back();
    if (api->cu_mem_create(&handles_.back(), piece_, &prop, 0) != CUDA_SUCCESS) {
      handles_.pop_back();
      return;
    }
    if (api->cu_mem_map(range_ + at, piece_, 0, handles_.back(), 0) != CUDA_SUCCESS) return;
    mapped_ += piece_;
  }
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (api->cu_mem_set_access(range_, want, &access, 1) == CUDA_SUCCESS)
    ptr_ = reinterpret_cast<uint8_t*>(range_);
}

inline DeviceBuffer::~DeviceBuffer() {
  const CudaApi* api = cuda_shim();
  if (kind_ == Alloc::kCudaMalloc) {
    if (ptr_ != nullptr) (void)api->mem_free(ptr_);
    return;
  }
  for (size_t at = 0; at < mapped_; at += piece_) (void)api->cu_mem_unmap(range_ + at, piece_);
  if (reserved_ != 0) (void)api->cu_mem_address_free(range_, reserved_);
  for (CUmemGenericAllocationHandle h : handles_) (void)api->cu_mem_release(h);
}

}  // namespace zcx::gpu_test
