// --device gpu of zcx-perf coll: CUDA device 0 and one stream, through libzcx's CUDA shim
// (the driver and runtime are loaded at run time; zcx-perf links neither). In a build without
// CUDA every call fails with a message saying so.
#pragma once

#include <zcx/coll.h>

#include <cstddef>
#include <string>

namespace zcx::perf {

class Device {
 public:
  Device() = default;
  ~Device();  // destroys the stream (after the communicator and the buffers are gone)
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Loads CUDA, makes device 0 current and creates a non-blocking stream. False, with *error
  // saying why (no driver, no device, a build without CUDA), when any of that fails.
  bool open(std::string* error);
  zcx_stream_t stream() const { return stream_; }
  // "CUDA device 0 (PCI 0000:19:00.0) of 1 CUDA device (driver 13.0, runtime 13.0)"
  const std::string& description() const { return description_; }

  void* allocate(size_t bytes) const;  // cudaMalloc; nullptr when it fails
  void release(void* p) const;         // cudaFree
  // Copies on the stream, then waits for it.
  bool upload(void* device, const void* host, size_t bytes, std::string* error) const;
  bool download(void* host, const void* device, size_t bytes, std::string* error) const;
  bool synchronize(std::string* error) const;  // cudaStreamSynchronize

 private:
  zcx_stream_t stream_ = nullptr;
  std::string description_;
};

}  // namespace zcx::perf
