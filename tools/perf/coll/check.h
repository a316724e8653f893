// The buffers of zcx-perf coll and the data check (#wrong): fill the inputs of one call with
// the test pattern of coll/data.h, run it once, count the output elements that differ.
// With --device gpu the calls get device buffers; the host ones hold what is filled and
// checked, copied with upload() and download_recv().
#pragma once

#include "coll/device.h"
#include "coll/ops.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace zcx::perf {

// A send and a receive buffer of `bytes` each (page aligned), owned; with a device, also a
// device copy of each, which is what the calls get.
class CollBuffers {
 public:
  // False when memory is short. device: nullptr for host buffers only.
  bool allocate(size_t bytes, const Device* device);
  unsigned char* send() const { return send_.get(); }  // host
  unsigned char* recv() const { return recv_.get(); }  // host
  unsigned char* call_send() const { return device_ ? dev_send_.get() : send(); }
  unsigned char* call_recv() const { return device_ ? dev_recv_.get() : recv(); }
  const Device* device() const { return device_; }
  // Device only (no-ops for host buffers): the first `bytes` of both host buffers to the
  // device ones, and the device receive buffer back to the host one.
  bool upload(size_t bytes, std::string* error) const;
  bool download_recv(size_t bytes, std::string* error) const;

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  struct DeviceFree {
    const Device* device = nullptr;
    void operator()(unsigned char* p) const { device->release(p); }
  };
  using DevicePtr = std::unique_ptr<unsigned char, DeviceFree>;
  const Device* device_ = nullptr;
  std::unique_ptr<unsigned char, Free> send_, recv_;
  DevicePtr dev_send_{nullptr, DeviceFree{}}, dev_recv_{nullptr, DeviceFree{}};
};

// One call's placement: where its input and output are.
struct Placement {
  const CollOp* op = nullptr;
  CollShape shape;
  CollCall call;
  bool in_place = false;
};

// Where the call's input and output are in the host buffers (nccl-tests' in-place
// convention, coll.h's in-place rules)...
const void* send_ptr(const Placement& p, const CollBuffers& b);
void* recv_ptr(const Placement& p, const CollBuffers& b);
// ... and the pointers the call gets: the same places in the device buffers, if any.
const void* call_send_ptr(const Placement& p, const CollBuffers& b);
void* call_recv_ptr(const Placement& p, const CollBuffers& b);
// Bytes of each buffer the placement uses (what upload/download_recv must copy).
size_t placement_bytes(const Placement& p);

// Inputs of value one, for timing (stable under repeated in-place reduction).
void fill_for_timing(const Placement& p, const CollBuffers& b);
// Test pattern in the inputs, a sentinel in the outputs. seed: differs per size and placement
// so that a result left over from an earlier call does not pass.
void fill_for_check(const Placement& p, uint64_t seed, const CollBuffers& b);
// Output elements of this rank that differ from the expected ones.
int64_t count_wrong(const Placement& p, uint64_t seed, const CollBuffers& b);

}  // namespace zcx::perf
