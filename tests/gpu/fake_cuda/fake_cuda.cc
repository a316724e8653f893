// A simulated CUDA driver + runtime for machines without a GPU, loaded in place of libcuda and
// libcudart through ZCX_CUDA_DRIVER_LIBRARY / ZCX_CUDA_RUNTIME_LIBRARY. It lets the CPU CI run
// the stream-ordered collectives' own logic: the wait for a stream's earlier work, the stream
// wait of asynchronous calls, staged transfers, ordering against work queued before and after a
// call, device avg. It is not a GPU: "device" memory is host memory, each stream is one worker
// thread that runs its copies, memsets, kernels and event records in order (streams:
// fake_cuda_streams.cc; events: fake_cuda_events.cc), and zcx's kernels run on the CPU (fake_cuda_kernels.cc); host code
// cannot touch device memory (fake_cuda_access.cc). Allocation, free and cudaDeviceSynchronize
// wait for every stream, as on a GPU, and so does closing an imported IPC mapping (reported of
// CUDA: pytorch/tensorpipe#321; the pessimistic choice). Legacy CUDA IPC works between
// processes of one host: cudaMalloc memory is a memfd mapping, its handle names the owner's pid
// and fd, and cudaIpcOpenMemHandle maps /proc/<pid>/fd/<fd> (so the cuda_ipc provider's
// protocol runs, over host memory). As a caching allocator does, cudaMalloc gives back the
// range freed last when the size fits; opening the handle of such a reused range while this
// process still maps the old allocation there fails with cudaErrorAlreadyMapped (what UCX's
// cuda_ipc cache meets; zcx-gpu-probe's "reopen" tells what a real driver does). Virtual
// memory (cuMem*) is simulated too (fake_cuda_vmm.cc).
#include "fake_cuda.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

namespace {

struct Allocation {
  size_t size;
  bool device;   // cudaMalloc or an imported IPC mapping (device), or cudaMallocHost
  int fd = -1;   // cudaMalloc: the memfd behind it (IPC handles name it)
  uint64_t id = 0;
  bool imported = false;  // cudaIpcOpenMemHandle: unmapped, not freed
  int owner_pid = 0;      // imported: the exporter and its address of the allocation
  uintptr_t owner_base = 0;
  uint64_t vmm = 0;       // a cuMemMap'ped range: its allocation handle (fake_cuda_vmm.cc)
};
std::atomic<uint64_t> g_next_id{1};

// The legacy IPC handle's contents (cudaIpcMemHandle_t has 64 bytes).
struct IpcName {
  uint64_t magic;
  int32_t pid, fd;
  uint64_t size, id, base;
};
constexpr uint64_t kIpcMagic = 0x7a637866616b6531ull;
std::mutex g_alloc_mu;
std::map<uintptr_t, Allocation> g_allocs;

const Allocation* find_alloc(const void* p, uintptr_t* base) {
  auto at = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocs.upper_bound(at);
  if (it == g_allocs.begin()) return nullptr;
  --it;
  if (at >= it->first + it->second.size) return nullptr;
  *base = it->first;
  return &it->second;
}

// The end of the device range that holds p: its allocation's, or for a cuMem mapping that of
// the run of mappings placed back to back after it (one virtual range, as PyTorch's
// expandable segments make). Under g_alloc_mu.
uintptr_t mapped_end_locked(uintptr_t base, const Allocation* a) {
  uintptr_t end = base + a->size;
  for (auto it = g_allocs.find(end); a->vmm != 0 && it != g_allocs.end() && it->second.vmm != 0;
       it = g_allocs.find(end))
    end += it->second.size;
  return end;
}

}  // namespace

MemoryKind fake_cuda_memory_kind(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  uintptr_t base = 0;
  const Allocation* a = find_alloc(p, &base);
  if (a == nullptr) return MemoryKind::kPageable;
  if (reinterpret_cast<uintptr_t>(p) + bytes > mapped_end_locked(base, a))
    return MemoryKind::kOverrun;
  return a->device ? MemoryKind::kDevice : MemoryKind::kPinned;
}

void fake_cuda_record_mapping(void* p, size_t size, uint64_t handle) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  Allocation a{size, true, -1, g_next_id++, false};
  a.vmm = handle;
  g_allocs[reinterpret_cast<uintptr_t>(p)] = a;
}

uint64_t fake_cuda_forget_mapping(void* p, size_t size) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  auto it = g_allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_allocs.end() || it->second.vmm == 0 || it->second.size != size) return 0;
  const uint64_t handle = it->second.vmm;
  g_allocs.erase(it);
  return handle;
}

uint64_t fake_cuda_mapping_at(const void* p, size_t size) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  uintptr_t base = 0;
  const Allocation* a = find_alloc(p, &base);
  if (a == nullptr || reinterpret_cast<uintptr_t>(p) + size > mapped_end_locked(base, a)) return 0;
  return a->vmm;
}

namespace {

thread_local bool t_context = false;  // a runtime call made the primary context current

// CUDA does not survive fork: in the child of a process that had initialised it, calls fail
// with an initialisation error (which is why the GPU tests probe devices in a forked child
// and fork their ranks before touching CUDA). The simulator fails the same way, so that a
// test or tool that forks after using CUDA fails here as it would on a GPU.
std::atomic<pid_t> g_initialised_by{0};

// Marks CUDA initialised by this process; false in a child forked after that.
bool initialise() {
  const pid_t me = getpid();
  pid_t first = 0;
  return g_initialised_by.compare_exchange_strong(first, me) || first == me;
}

// Initialises and makes the primary context current on this thread, as a runtime call does.
bool make_current() {
  if (!initialise()) return false;
  t_context = true;
  return true;
}

}  // namespace

bool fake_cuda_initialise() { return initialise(); }
bool fake_cuda_make_current() { return make_current(); }

// ---- driver ----
FAKE_API CUresult cuInit(unsigned) {
  return initialise() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
FAKE_API CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuCtxGetCurrent(CUcontext* c) {
  *c = t_context ? reinterpret_cast<CUcontext>(&t_context) : nullptr;
  return CUDA_SUCCESS;
}
// Buffer id, memory type and managed (never: the simulator has no managed memory); a pointer
// the runtime did not allocate is CUDA_ERROR_INVALID_VALUE, as unregistered host memory is.
FAKE_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  uintptr_t base = 0;
  const Allocation* a = find_alloc(reinterpret_cast<void*>(p), &base);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data) = a->id; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = a->device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<unsigned*>(data) = 0; break;
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  uintptr_t b = 0;
  const Allocation* a = find_alloc(reinterpret_cast<void*>(p), &b);
  if (a == nullptr) return CUDA_ERROR_NOT_FOUND;
  *base = b, *size = a->size;
  return CUDA_SUCCESS;
}
// ---- runtime ----
FAKE_API cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
FAKE_API cudaError_t cudaGetDeviceCount(int* n) {
  if (!initialise()) return cudaErrorInitializationError;
  *n = 1;
  return cudaSuccess;
}
FAKE_API cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
FAKE_API cudaError_t cudaSetDevice(int d) {
  if (d != 0) return cudaErrorInvalidDevice;
  if (!make_current()) return cudaErrorInitializationError;
  return cudaSuccess;
}
// The device reports GPUDirect RDMA writes as unordered with host-side flushes supported
// (as a PCIe GPU does), so zcx's flush after a GPUDirect receive runs here; every other
// attribute reads 0.
FAKE_API cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int) {
  *v = attr == cudaDevAttrGPUDirectRDMAFlushWritesOptions ? cudaFlushGPUDirectRDMAWritesOptionHost
                                                          : 0;
  return cudaSuccess;
}
static std::atomic<long> g_gdr_flushes{0};
FAKE_API cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTarget,
                                                        cudaFlushGPUDirectRDMAWritesScope) {
  g_gdr_flushes++;
  return cudaSuccess;
}
// For tests: how many flushes zcx asked for in this process.
FAKE_API long fake_cuda_gdr_flushes() { return g_gdr_flushes.load(); }
FAKE_API cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int) {
  std::snprintf(id, static_cast<size_t>(len), "0000:00:00.0");
  return cudaSuccess;
}
FAKE_API cudaError_t cudaDeviceCanAccessPeer(int* can, int, int) {
  *can = 0;
  return cudaSuccess;
}
FAKE_API cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* p) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  uintptr_t base = 0;
  const Allocation* a = find_alloc(p, &base);
  *attr = cudaPointerAttributes{};
  attr->type = a == nullptr ? cudaMemoryTypeUnregistered
                            : (a->device ? cudaMemoryTypeDevice : cudaMemoryTypeHost);
  attr->device = 0;
  attr->devicePointer = const_cast<void*>(p);
  attr->hostPointer = a && !a->device ? const_cast<void*>(p) : nullptr;
  return cudaSuccess;
}

namespace {
void record(void* p, Allocation a) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  g_allocs[reinterpret_cast<uintptr_t>(p)] = a;
}

// The device range freed last: the next cudaMalloc that fits asks for it back.
struct FreedRange {
  void* at = nullptr;
  size_t size = 0;
};
FreedRange g_freed;  // under g_alloc_mu

void* reuse_hint(size_t size) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  void* at = size <= g_freed.size ? g_freed.at : nullptr;
  if (at != nullptr) g_freed = {};
  return at;
}

// Device memory: a memfd mapping, so another process can map it through an IPC handle.
cudaError_t device_alloc(void** p, size_t n) {
  if (!make_current()) return cudaErrorInitializationError;
  fake_cuda_sync_device();
  const size_t size = (std::max<size_t>(n, 1) + 4095) / 4096 * 4096;
  int fd = memfd_create("zcx-fake-cuda", MFD_CLOEXEC);
  if (fd < 0) return cudaErrorMemoryAllocation;
  void* m = ftruncate(fd, static_cast<off_t>(size)) == 0
                ? mmap(reuse_hint(size), size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  if (m == MAP_FAILED) {
    close(fd);
    return cudaErrorMemoryAllocation;
  }
  fake_cuda_guard(m, size);
  *p = m;
  record(m, Allocation{size, true, fd, g_next_id++, false});
  return cudaSuccess;
}

cudaError_t host_alloc(void** p, size_t n) {
  if (!make_current()) return cudaErrorInitializationError;
  fake_cuda_sync_device();
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  record(*p, Allocation{n ? n : 1, false, -1, g_next_id++, false});
  return cudaSuccess;
}

cudaError_t fake_free(void* p) {
  if (p == nullptr) return cudaSuccess;
  fake_cuda_sync_device();
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(g_alloc_mu);
    auto it = g_allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == g_allocs.end()) return cudaErrorInvalidValue;
    if (it->second.vmm != 0) return cudaErrorInvalidValue;  // cuMemUnmap's, not cudaFree's
    a = it->second;
    g_allocs.erase(it);
    if (a.device && !a.imported) g_freed = {p, a.size};
  }
  if (!a.device) {
    std::free(p);
    return cudaSuccess;
  }
  munmap(p, a.size);
  if (a.fd >= 0) close(a.fd);
  return cudaSuccess;
}
}  // namespace

FAKE_API cudaError_t cudaMalloc(void** p, size_t n) { return device_alloc(p, n); }
FAKE_API cudaError_t cudaFree(void* p) {
  if (!make_current()) return cudaErrorInitializationError;
  return fake_free(p);
}
FAKE_API cudaError_t cudaMallocHost(void** p, size_t n) { return host_alloc(p, n); }
FAKE_API cudaError_t cudaFreeHost(void* p) { return fake_free(p); }
FAKE_API cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind kind) {
  if (!fake_cuda_copy_fits(d, s, n, kind, "cudaMemcpy")) return cudaErrorInvalidValue;
  DeviceAccess access;
  std::memcpy(d, s, n);
  return cudaSuccess;
}
FAKE_API cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind kind,
                                     cudaStream_t st) {
  if (!fake_cuda_copy_fits(d, s, n, kind, "cudaMemcpyAsync")) return cudaErrorInvalidValue;
  fake_cuda_enqueue(st, [=] { std::memcpy(d, s, n); });
  return cudaSuccess;
}
FAKE_API cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t st) {
  if (!fake_cuda_device_reaches(d, n, "cudaMemsetAsync")) return cudaErrorInvalidValue;
  fake_cuda_enqueue(st, [=] { std::memset(d, v, n); });
  return cudaSuccess;
}
static std::atomic<long> g_ipc_exports{0};
// For tests: how many legacy IPC handles were made in this process.
FAKE_API long fake_cuda_ipc_exports() { return g_ipc_exports.load(); }
FAKE_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* h, void* p) {
  static_assert(sizeof(IpcName) <= sizeof(cudaIpcMemHandle_t));
  g_ipc_exports++;
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  auto it = g_allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_allocs.end() || it->second.fd < 0) return cudaErrorInvalidValue;
  IpcName name{kIpcMagic, static_cast<int32_t>(getpid()), it->second.fd, it->second.size,
               it->second.id, it->first};
  std::memset(h, 0, sizeof(*h));
  std::memcpy(h, &name, sizeof(name));
  return cudaSuccess;
}
static std::atomic<long> g_ipc_refused{0};
// For tests: how many opens failed with cudaErrorAlreadyMapped in this process, and how many
// imported mappings are open now.
FAKE_API long fake_cuda_ipc_refused_opens() { return g_ipc_refused.load(); }
FAKE_API long fake_cuda_ipc_open_imports() {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  return std::count_if(g_allocs.begin(), g_allocs.end(),
                       [](const auto& kv) { return kv.second.imported; });
}
// Whether this process maps another allocation of the exporter's over name's range.
static bool range_still_mapped(const IpcName& name) {
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  for (const auto& [at, a] : g_allocs)
    if (a.imported && a.owner_pid == name.pid && a.id != name.id &&
        a.owner_base < name.base + name.size && name.base < a.owner_base + a.size)
      return true;
  return false;
}

FAKE_API cudaError_t cudaIpcOpenMemHandle(void** p, cudaIpcMemHandle_t h, unsigned) {
  IpcName name;
  std::memcpy(&name, &h, sizeof(name));
  if (name.magic != kIpcMagic) return cudaErrorInvalidValue;
  if (range_still_mapped(name)) {
    g_ipc_refused++;
    return cudaErrorAlreadyMapped;
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", name.pid, name.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return cudaErrorMapBufferObjectFailed;
  void* m = mmap(nullptr, name.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return cudaErrorMapBufferObjectFailed;
  fake_cuda_guard(m, name.size);
  *p = m;
  record(m, Allocation{name.size, true, -1, name.id, true, name.pid,
                       static_cast<uintptr_t>(name.base)});
  return cudaSuccess;
}
FAKE_API cudaError_t cudaIpcCloseMemHandle(void* p) {
  fake_cuda_sync_device();
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  auto it = g_allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_allocs.end() || !it->second.imported) return cudaErrorInvalidValue;
  munmap(p, it->second.size);
  g_allocs.erase(it);
  return cudaSuccess;
}
