// Ring reduce-scatter (and reducescatterv): p-1 steps of receive-reduce-send; partial sums
// of other ranks' blocks live in scratch, the own block lands in recvbuf.
#include "algorithms/algorithms.h"
#include "algorithms/ring_phases.h"

#include <vector>

namespace zcx::coll {

Status build_reducescatter_ring(const OpArgs& a, Schedule& s) {
  const size_t es = a.esize();
  std::vector<size_t> counts(a.nranks, a.count);
  const size_t* c = a.kind == CollKind::kReducescatterv ? a.counts : counts.data();
  RingBlocks B = ring_blocks(c, nullptr, es, a.nranks, a.chunk);
  auto* in = static_cast<const uint8_t*>(a.sendbuf);
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  if (single_rank_copy(a, s, B.len[0])) return Status::kSuccess;
  size_t total = B.off.back() + B.len.back();
  auto* acc = static_cast<uint8_t*>(s.scratch(total));
  TaskGrid sends;
  std::vector<int> own_final;
  ring_reduce_scatter(s, B, a.rank, a.nranks, in, acc, out, &sends, &own_final);
  return Status::kSuccess;
}

}  // namespace zcx::coll
