// What the simulated CUDA runtime's files share (fake_cuda.cc: memory; fake_cuda_streams.cc:
// streams; fake_cuda_events.cc: events; fake_cuda_kernels.cc: zcx's module and kernels;
// fake_cuda_vmm.cc: virtual memory management).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <functional>

#define FAKE_API extern "C" __attribute__((visibility("default")))

// Device memory the host cannot touch (fake_cuda_access.cc): fake_cuda_guard marks a device
// range; a DeviceAccess opens every device range to this thread for its lifetime (the
// simulated device's own work: streams, cudaMemcpy, a simulated NIC's DMA).
void fake_cuda_guard(void* p, size_t size);
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;

 private:
  int key_;
  int saved_ = 0;
};

// What the simulated runtime knows of [p, p + bytes): device memory (cudaMalloc or an
// imported IPC mapping), pinned host memory (cudaMallocHost), other (pageable) host memory,
// or a range that starts in a known allocation and runs past its end (fake_cuda.cc).
enum class MemoryKind { kDevice, kPinned, kPageable, kOverrun };
MemoryKind fake_cuda_memory_kind(const void* p, size_t bytes);
// Whether a copy of `kind` from src to dst is one a GPU defines, and whether a kernel or
// memset reaches [p, p + bytes) (device or pinned memory, within its allocation). Each
// prints why not to stderr (fake_cuda_access.cc).
bool fake_cuda_copy_fits(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                         const char* call);
bool fake_cuda_device_reaches(const void* p, size_t bytes, const char* what);

// Queues `fn` on stream `s` (run in order by the stream's thread; NULL: at once, here;
// fake_cuda_streams.cc).
void fake_cuda_enqueue(cudaStream_t s, std::function<void()> fn);

// Waits for every stream (fake_cuda_streams.cc), as the calls that wait for the whole device
// do.
void fake_cuda_sync_device();
// Marks CUDA initialised by this process; false in a child forked after that. make_current
// also makes the primary context current on this thread, as a runtime call does.
bool fake_cuda_initialise();
bool fake_cuda_make_current();
// A cuMemMap'ped range enters the table of device memory (a new buffer id) and leaves it;
// forget returns the range's allocation handle, or 0 when [p, p + size) is not exactly one.
// mapping_at: the handle of the mapping that holds p, when mappings placed back to back from
// it hold all of [p, p + size); else 0.
void fake_cuda_record_mapping(void* p, size_t size, uint64_t handle);
uint64_t fake_cuda_forget_mapping(void* p, size_t size);
uint64_t fake_cuda_mapping_at(const void* p, size_t size);
