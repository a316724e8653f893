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

void shared_finish(const OpArgs& a, const SharedLane& lane, uint64_t seq) {
  const size_t bytes = a.count * a.esize();
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  if (bytes == 0) return;
  switch (a.kind) {
    case CollKind::kAllreduce:
    case CollKind::kReduce:
      if (a.kind == CollKind::kReduce && a.rank != a.root) return;
      reduce(a.dtype, a.op, out, lane.data(0, seq, bytes), lane.data(1, seq, bytes), a.count);
      for (int r = 2; r < a.nranks; ++r) reduce(a.dtype, a.op, out, out, lane.data(r, seq, bytes), a.count);
      return;
    case CollKind::kBroadcast: memcpy(out, lane.data(a.root, seq, bytes), bytes); return;
    case CollKind::kAllgather:
      for (int r = 0; r < a.nranks; ++r) memcpy(out + bytes * r, lane.data(r, seq, bytes), bytes);
      return;
    default: return;
  }
}

}  // namespace zcx::coll
