#include "coll/check.h"

#include "coll/data.h"

#include <algorithm>
#include <cstring>

namespace zcx::perf {
namespace {

constexpr unsigned char kSentinel = 0xa5;  // no test value is made of these bytes (but int8)

size_t elem_size(const Placement& p) { return zcx_dtype_size(p.call.dtype); }

size_t buffer_elems(const Placement& p) { return std::max(p.shape.send, p.shape.recv); }

// Elements of this rank's input: all of them for reducescatter and alltoall, one block
// (param) for the others.
size_t input_elems(const Placement& p) { return p.shape.send; }

// Elements the output holds (the rest of the receive buffer is not written).
size_t output_elems(const Placement& p) { return p.shape.recv; }

template <class T>
T sentinel() {
  T t;
  std::memset(&t, kSentinel, sizeof t);
  return t;
}

template <class T>
void fill_input(const Placement& p, const Pattern& pattern, const CollBuffers& b) {
  const CollCall& c = p.call;
  if (p.op->kind == CollKind::kBroadcast && c.rank != c.root) return;  // only the root's is read
  T* in = static_cast<T*>(const_cast<void*>(send_ptr(p, b)));
  for (size_t j = 0; j < input_elems(p); ++j) in[j] = value<T>(pattern, c.rank, j);
}

// The value output element j of this rank must have.
template <class T>
T expected(const Placement& p, const Pattern& pattern, size_t j) {
  const CollCall& c = p.call;
  size_t block = p.shape.param;
  switch (p.op->kind) {
    case CollKind::kAllreduce: return reduced<T>(pattern, c.nranks, j, c.redop);
    case CollKind::kReduce:
      if (c.rank == c.root) return reduced<T>(pattern, c.nranks, j, c.redop);
      if (p.in_place) return value<T>(pattern, c.rank, j);  // the input, untouched
      return sentinel<T>();
    case CollKind::kBroadcast: return value<T>(pattern, c.root, j);
    case CollKind::kAllgather: return value<T>(pattern, static_cast<int>(j / block), j % block);
    case CollKind::kReducescatter:
      return reduced<T>(pattern, c.nranks, c.rank * block + j, c.redop);
    case CollKind::kAlltoall:
      return value<T>(pattern, static_cast<int>(j / block), c.rank * block + j % block);
    case CollKind::kSendrecv: break;
  }
  return value<T>(pattern, (c.rank + c.nranks - 1) % c.nranks, j);
}

template <class T>
int64_t count_wrong_typed(const Placement& p, const Pattern& pattern, const CollBuffers& b) {
  const T* out = static_cast<const T*>(recv_ptr(p, b));
  int64_t wrong = 0;
  for (size_t j = 0; j < output_elems(p); ++j)
    wrong += !matches<T>(out[j], expected<T>(p, pattern, j), p.call.nranks);
  return wrong;
}

template <class T>
Pattern pattern_for(const Placement& p, uint64_t seed) {
  return make_pattern<T>(p.call.redop, p.op->reduces, seed, p.call.nranks);
}

}  // namespace

bool CollBuffers::allocate(size_t bytes, const Device* device) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  send_.reset(static_cast<unsigned char*>(std::aligned_alloc(4096, rounded)));
  recv_.reset(static_cast<unsigned char*>(std::aligned_alloc(4096, rounded)));
  device_ = device;
  if (device_ != nullptr) {
    dev_send_ = DevicePtr(static_cast<unsigned char*>(device->allocate(rounded)), {device});
    dev_recv_ = DevicePtr(static_cast<unsigned char*>(device->allocate(rounded)), {device});
    if (!dev_send_ || !dev_recv_) return false;
  }
  return send_ && recv_;
}

bool CollBuffers::upload(size_t bytes, std::string* error) const {
  return device_ == nullptr || (device_->upload(call_send(), send(), bytes, error) &&
                                device_->upload(call_recv(), recv(), bytes, error));
}

bool CollBuffers::download_recv(size_t bytes, std::string* error) const {
  return device_ == nullptr || device_->download(recv(), call_recv(), bytes, error);
}

namespace {

// The call's input and output within buffers whose bases are send and recv.
unsigned char* input_in(const Placement& p, unsigned char* send, unsigned char* recv) {
  if (!p.in_place) return send;
  return recv + p.shape.send_inplace * static_cast<size_t>(p.call.rank) * elem_size(p);
}

unsigned char* output_in(const Placement& p, unsigned char* recv) {
  if (!p.in_place) return recv;
  return recv + p.shape.recv_inplace * static_cast<size_t>(p.call.rank) * elem_size(p);
}

}  // namespace

const void* send_ptr(const Placement& p, const CollBuffers& b) {
  return input_in(p, b.send(), b.recv());
}

void* recv_ptr(const Placement& p, const CollBuffers& b) { return output_in(p, b.recv()); }

const void* call_send_ptr(const Placement& p, const CollBuffers& b) {
  return input_in(p, b.call_send(), b.call_recv());
}

void* call_recv_ptr(const Placement& p, const CollBuffers& b) {
  return output_in(p, b.call_recv());
}

size_t placement_bytes(const Placement& p) { return buffer_elems(p) * elem_size(p); }

void fill_for_timing(const Placement& p, const CollBuffers& b) {
  with_dtype(p.call.dtype, [&](auto zero) {
    using T = decltype(zero);
    T one = from_double<T>(1.0);
    std::fill_n(reinterpret_cast<T*>(b.send()), buffer_elems(p), one);
    std::fill_n(reinterpret_cast<T*>(b.recv()), buffer_elems(p), one);
  });
}

void fill_for_check(const Placement& p, uint64_t seed, const CollBuffers& b) {
  std::memset(b.recv(), kSentinel, buffer_elems(p) * elem_size(p));
  with_dtype(p.call.dtype, [&](auto zero) {
    using T = decltype(zero);
    fill_input<T>(p, pattern_for<T>(p, seed), b);
  });
}

int64_t count_wrong(const Placement& p, uint64_t seed, const CollBuffers& b) {
  return with_dtype(p.call.dtype, [&](auto zero) {
    using T = decltype(zero);
    return count_wrong_typed<T>(p, pattern_for<T>(p, seed), b);
  });
}

}  // namespace zcx::perf
