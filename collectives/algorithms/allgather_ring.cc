// Ring allgather (and allgatherv): p-1 steps of receive-forward, straight into recvbuf.
#include "algorithms/algorithms.h"
#include "algorithms/ring_phases.h"

#include <vector>

namespace zcx::coll {

Status build_allgather_ring(const OpArgs& a, Schedule& s) {
  const size_t es = a.esize();
  std::vector<size_t> counts(a.nranks, a.count);
  bool v = a.kind == CollKind::kAllgatherv;
  RingBlocks B = ring_blocks(v ? a.counts : counts.data(), v ? a.displs : nullptr, es,
                             a.nranks, a.chunk);
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  auto* own = static_cast<const uint8_t*>(a.sendbuf);
  s.copy(out + B.off[a.rank], own, B.len[a.rank]);  // nothing when in place
  ring_allgather(s, B, a.rank, a.nranks, own, out, {}, nullptr);
  return Status::kSuccess;
}

}  // namespace zcx::coll
