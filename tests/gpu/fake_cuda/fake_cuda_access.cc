// Device memory that the host cannot touch, as on a GPU. A real cudaMalloc range faults when
// host code reads or writes it, and a system call handed one fails with EFAULT; the simulated
// runtime's device memory is host memory, so without this a zcx path that touched a device
// buffer from the CPU (a host memcpy, a CPU reduction, a send() from it) would pass here and
// crash on a GPU. Device ranges carry a memory protection key that every thread's rights deny
// (Linux starts each process, and so each thread it makes, with all keys but 0 denied); only
// the simulated device opens it: a stream's work, cudaMemcpy, and a simulated NIC's DMA
// (fake_cuda_dma_copy). Where the CPU or kernel has no protection keys, device memory stays
// open and fake_cuda_device_guarded() says so.
#include "fake_cuda.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <mutex>

namespace {

int device_key() {
  static int key = -1;
  static std::once_flag once;
  // Denied for the calling thread at once; every other thread is denied from its start.
  std::call_once(once, [] { key = pkey_alloc(0, PKEY_DISABLE_ACCESS); });
  return key;
}

// Why a copy of `kind` between these memories is undefined on a GPU, or nullptr.
const char* copy_mismatch(MemoryKind to, MemoryKind from, cudaMemcpyKind kind) {
  if (to == MemoryKind::kOverrun || from == MemoryKind::kOverrun)
    return "a range runs past the end of its allocation";
  const bool to_dev = to == MemoryKind::kDevice, from_dev = from == MemoryKind::kDevice;
  switch (kind) {
    case cudaMemcpyHostToDevice: return to_dev && !from_dev ? nullptr : "not host to device";
    case cudaMemcpyDeviceToHost: return !to_dev && from_dev ? nullptr : "not device to host";
    case cudaMemcpyDeviceToDevice: return to_dev && from_dev ? nullptr : "not device to device";
    case cudaMemcpyHostToHost: return !to_dev && !from_dev ? nullptr : "not host to host";
    default: return nullptr;  // cudaMemcpyDefault: the pointers say
  }
}

}  // namespace

void fake_cuda_guard(void* p, size_t size) {
  const int key = device_key();
  if (key >= 0) (void)pkey_mprotect(p, size, PROT_READ | PROT_WRITE, key);
}

DeviceAccess::DeviceAccess() : key_(device_key()) {
  if (key_ < 0) return;
  saved_ = pkey_get(key_);
  (void)pkey_set(key_, 0);
}

DeviceAccess::~DeviceAccess() {
  if (key_ >= 0) (void)pkey_set(key_, static_cast<unsigned>(saved_));
}

bool fake_cuda_copy_fits(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                         const char* call) {
  if (bytes == 0) return true;
  const char* why =
      copy_mismatch(fake_cuda_memory_kind(dst, bytes), fake_cuda_memory_kind(src, bytes), kind);
  if (why != nullptr)
    std::fprintf(stderr, "fake_cuda: %s of %zu bytes from %p to %p (kind %d): %s\n", call, bytes,
                 src, dst, static_cast<int>(kind), why);
  return why == nullptr;
}

bool fake_cuda_device_reaches(const void* p, size_t bytes, const char* what) {
  const MemoryKind kind = fake_cuda_memory_kind(p, bytes);
  if (bytes == 0 || kind == MemoryKind::kDevice || kind == MemoryKind::kPinned) return true;
  std::fprintf(stderr, "fake_cuda: %s given %zu bytes at %p: %s\n", what, bytes, p,
               kind == MemoryKind::kOverrun ? "past the end of its allocation"
                                            : "pageable host memory, which the device cannot reach");
  return false;
}

// For tests: whether host code that touches device memory faults here.
FAKE_API long fake_cuda_device_guarded() { return device_key() >= 0 ? 1 : 0; }

// For a simulated NIC that reaches GPU memory (tests/bootstrap/fake_provider.cc's fakegdr): a
// copy with the device's access, as the NIC's DMA has.
FAKE_API void fake_cuda_dma_copy(void* dst, const void* src, size_t n) {
  DeviceAccess access;
  std::memcpy(dst, src, n);
}
