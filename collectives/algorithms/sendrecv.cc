// Point-to-point send or receive (root = peer; a send has sendbuf set). Each message carries
// its own descriptor, so a receive whose count differs from the send's fails with kMismatch.
// Inside a group the schedules of all calls are concatenated and posted together.
#include "algorithms/algorithms.h"

namespace zcx::coll {

Status build_sendrecv(const OpArgs& a, Schedule& s) {
  const size_t bytes = a.count * a.esize();
  if (a.root == a.rank)
    return set_error(Status::kInvalidArg, kLogColl, "send/recv to self (rank %d) is not supported",
                     a.rank);
  if (a.sendbuf) s.send_checked(a.root, a.sendbuf, bytes);
  else s.recv_checked(a.root, a.recvbuf, bytes);
  return Status::kSuccess;
}

BuildFn builder_for(CollKind kind, Algo algo) {
  switch (kind) {
    case CollKind::kAllreduce:
      if (algo == Algo::kRing) return build_allreduce_ring;
      if (algo == Algo::kTree) return build_allreduce_tree;
      if (algo == Algo::kRhd) return build_allreduce_rhd;
      if (algo == Algo::kHier) return build_allreduce_hier;
      if (algo == Algo::kDirect) return build_allreduce_direct;
      return nullptr;
    case CollKind::kBroadcast:
      return algo == Algo::kChain ? build_broadcast_chain
             : algo == Algo::kBinomial ? build_broadcast_binomial : nullptr;
    case CollKind::kReduce:
      return algo == Algo::kChain ? build_reduce_chain
             : algo == Algo::kBinomial ? build_reduce_binomial : nullptr;
    case CollKind::kAllgather:
    case CollKind::kAllgatherv: return algo == Algo::kRing ? build_allgather_ring : nullptr;
    case CollKind::kReducescatter:
    case CollKind::kReducescatterv: return algo == Algo::kRing ? build_reducescatter_ring : nullptr;
    case CollKind::kAlltoall:
    case CollKind::kAlltoallv: return algo == Algo::kPairwise ? build_alltoall_pairwise : nullptr;
    case CollKind::kBarrier: return algo == Algo::kRhd ? build_barrier : nullptr;
    case CollKind::kSendRecv: return build_sendrecv;
    default: return nullptr;
  }
}

}  // namespace zcx::coll
