// Shared-lane collectives (core/shared_lane.h): every rank has published its contribution in
// the communicator's segment; each rank now computes its own result from the slots. The
// allreduce combines the contributions in rank order 0, 1, ..., n-1, as the direct
// allreduce does, so every rank gets the bit-identical result.
#include "algorithms/algorithms.h"
#include "core/shared_lane.h"
#include "reduce/reduce.h"

#include <cstring>

namespace zcx::coll {

size_t shared_contribution(const OpArgs& a, const void** data) {
  const size_t bytes = a.count * a.esize();
  *data = a.sendbuf;
  switch (a.kind) {
    case CollKind::kBroadcast: return a.rank == a.root ? bytes : 0;
    case CollKind::kBarrier: return 0;
    default: return bytes;
  }
}

namespace {

// Rank r's contribution. A rank reads its own from its send buffer, not from its slot: a
// peer polling the slot has just pulled that line away (on this VM's AMD hosts a read of a
// line another core wrote moves it), and reading it back cost a second hand-off per
// operation. In place, rank r >= 2's send buffer already holds the partial result.
const uint8_t* contribution(const OpArgs& a, const SharedLane& lane, uint64_t seq, int r,
                            size_t bytes) {
  const bool own_intact = a.sendbuf != a.recvbuf || r <= 1;
  if (r == a.rank && own_intact) return static_cast<const uint8_t*>(a.sendbuf);
  return lane.data(r, seq, bytes);
}

}  // namespace

void shared_finish(const OpArgs& a, const SharedLane& lane, uint64_t seq) {
  const size_t bytes = a.count * a.esize();
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  if (bytes == 0) return;
  switch (a.kind) {
    case CollKind::kAllreduce:
    case CollKind::kReduce:
      if (a.kind == CollKind::kReduce && a.rank != a.root) return;
      reduce(a.dtype, a.op, out, contribution(a, lane, seq, 0, bytes),
             contribution(a, lane, seq, 1, bytes), a.count);
      for (int r = 2; r < a.nranks; ++r)
        reduce(a.dtype, a.op, out, out, contribution(a, lane, seq, r, bytes), a.count);
      return;
    case CollKind::kBroadcast: memcpy(out, lane.data(a.root, seq, bytes), bytes); return;
    case CollKind::kAllgather:
      for (int r = 0; r < a.nranks; ++r) memcpy(out + bytes * r, lane.data(r, seq, bytes), bytes);
      return;
    default: return;
  }
}

}  // namespace zcx::coll
