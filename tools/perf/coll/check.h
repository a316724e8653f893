// The buffers of zcx-perf coll and the data check (#wrong): fill the inputs of one call with
// the test pattern of coll/data.h, run it once, count the output elements that differ.
#pragma once

#include "coll/ops.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace zcx::perf {

// A send and a receive buffer of `bytes` each (page aligned), owned.
class CollBuffers {
 public:
  // False when memory is short.
  bool allocate(size_t bytes);
  unsigned char* send() const { return send_.get(); }
  unsigned char* recv() const { return recv_.get(); }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> send_, recv_;
};

// One call's placement: where its input and output are.
struct Placement {
  const CollOp* op = nullptr;
  CollShape shape;
  CollCall call;
  bool in_place = false;
};

// The pointers the call gets (nccl-tests' in-place convention, coll.h's in-place rules).
const void* send_ptr(const Placement& p, const CollBuffers& b);
void* recv_ptr(const Placement& p, const CollBuffers& b);

// Inputs of value one, for timing (stable under repeated in-place reduction).
void fill_for_timing(const Placement& p, const CollBuffers& b);
// Test pattern in the inputs, a sentinel in the outputs. seed: differs per size and placement
// so that a result left over from an earlier call does not pass.
void fill_for_check(const Placement& p, uint64_t seed, const CollBuffers& b);
// Output elements of this rank that differ from the expected ones.
int64_t count_wrong(const Placement& p, uint64_t seed, const CollBuffers& b);

}  // namespace zcx::perf
