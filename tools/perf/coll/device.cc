#include "coll/device.h"

#include <zcx/config.h>
#if ZCX_HAVE_CUDA
#include "common/dl/cuda_shim.h"
#endif

namespace zcx::perf {

#if ZCX_HAVE_CUDA
namespace {

cudaStream_t as_cuda(zcx_stream_t s) { return static_cast<cudaStream_t>(s); }

// The shim's cuda_check words the failure; the tool passes its text on.
bool cuda_ok(cudaError_t e, const char* what, std::string* error) {
  if (cuda_check(e, what) == Status::kSuccess) return true;
  *error = last_error();
  return false;
}

bool copy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind, zcx_stream_t stream,
          std::string* error) {
  if (bytes == 0) return true;
  const CudaApi* api = cuda_shim();
  return cuda_ok(api->copy_async(to, from, bytes, kind, as_cuda(stream)), "cudaMemcpyAsync",
                 error) &&
         cuda_ok(api->stream_synchronize(as_cuda(stream)), "cudaStreamSynchronize", error);
}

}  // namespace

Device::~Device() {
  if (stream_ != nullptr) (void)cuda_shim()->stream_destroy(as_cuda(stream_));
}

bool Device::open(std::string* error) {
  std::string why;
  if (cuda_device_count(&why) <= 0) {
    *error = "--device gpu needs a CUDA device, and there is none here: " + why;
    return false;
  }
  const CudaApi* api = cuda_shim();
  cudaStream_t stream = nullptr;
  if (!cuda_ok(api->set_device(0), "cudaSetDevice(0)", error) ||
      !cuda_ok(api->stream_create_with_flags(&stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags", error))
    return false;
  stream_ = stream;
  char bus[64] = "?";
  if (api->device_get_pci_bus_id(bus, sizeof bus, 0) != cudaSuccess) bus[0] = '?', bus[1] = 0;
  description_ = "CUDA device 0 (PCI " + std::string(bus) + ") of " + cuda_shim_describe();
  return true;
}

void* Device::allocate(size_t bytes) const {
  void* p = nullptr;
  return cuda_shim()->mem_alloc(&p, bytes) == cudaSuccess ? p : nullptr;
}

void Device::release(void* p) const {
  if (p != nullptr) (void)cuda_shim()->mem_free(p);
}

bool Device::upload(void* device, const void* host, size_t bytes, std::string* error) const {
  return copy(device, host, bytes, cudaMemcpyHostToDevice, stream_, error);
}

bool Device::download(void* host, const void* device, size_t bytes, std::string* error) const {
  return copy(host, device, bytes, cudaMemcpyDeviceToHost, stream_, error);
}

bool Device::synchronize(std::string* error) const {
  return cuda_ok(cuda_shim()->stream_synchronize(as_cuda(stream_)), "cudaStreamSynchronize",
                 error);
}

#else  // built without CUDA

namespace {
const char* kNoCuda = "--device gpu: this zcx-perf was built without CUDA (-DZCX_WITH_CUDA=ON)";
}

Device::~Device() = default;
bool Device::open(std::string* error) {
  *error = kNoCuda;
  return false;
}
void* Device::allocate(size_t) const { return nullptr; }
void Device::release(void*) const {}
bool Device::upload(void*, const void*, size_t, std::string* error) const {
  *error = kNoCuda;
  return false;
}
bool Device::download(void*, const void*, size_t, std::string* error) const {
  *error = kNoCuda;
  return false;
}
bool Device::synchronize(std::string* error) const {
  *error = kNoCuda;
  return false;
}

#endif

}  // namespace zcx::perf
