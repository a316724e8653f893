// Ring allreduce = ring reduce-scatter + ring allgather, chunked so that consecutive chunks
// pipeline: 2(p-1) steps, each rank sends and receives 2(p-1)/p of the vector (the
// bandwidth lower bound). Partial sums accumulate in recvbuf; in place works unchanged.
#include "algorithms/algorithms.h"
#include "algorithms/ring_phases.h"

#include <cstring>

namespace zcx::coll {

Status build_allreduce_ring(const OpArgs& a, Schedule& s) {
  const size_t es = a.esize();
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  auto* in = static_cast<const uint8_t*>(a.sendbuf);
  if (single_rank_copy(a, s, a.count * es)) return Status::kSuccess;
  RingBlocks B = ring_blocks_even(a.count, es, a.nranks, a.chunk);
  TaskGrid rs_sends;
  std::vector<int> own_final;
  ring_reduce_scatter(s, B, a.rank, a.nranks, in, out, out + B.off[a.rank], &rs_sends, &own_final);
  // The allgather receives into blocks whose partial sums the reduce-scatter sent from
  // recvbuf: those sends must be complete first.
  ring_allgather(s, B, a.rank, a.nranks, out + B.off[a.rank], out, own_final, &rs_sends);
  return Status::kSuccess;
}

}  // namespace zcx::coll
