// From (collective, algorithm) to one rank's schedule: the table of builders, and the
// fallback to a collective's default algorithm when the chosen one declines a call. The
// communicator plans with it (core/comm.cc), and so does zcx-plan, which builds every
// rank's schedule to show the traffic without running anything.
#include "algorithms/algorithms.h"

namespace zcx::coll {
namespace {

// An empty schedule for `a`; every collective first checks its ring predecessor's
// descriptor, so that a disagreement is a kMismatch somewhere even when the disagreeing
// ranks would exchange no data.
Schedule fresh_schedule(const OpArgs& a, const std::shared_ptr<ScratchPool>& pool) {
  Schedule s(a.dtype, a.op);
  s.set_pool(pool);
  s.set_device(a.device);
  if (a.kind != CollKind::kSendRecv && a.nranks > 1)
    s.check_link((a.rank + 1) % a.nranks, (a.rank + a.nranks - 1) % a.nranks);
  return s;
}

}  // namespace

size_t select_bytes(const OpArgs& a) {
  const size_t es = a.esize();
  switch (a.kind) {
    case CollKind::kAllgather:
    case CollKind::kReducescatter:
    case CollKind::kAlltoall: return a.count * es * static_cast<size_t>(a.nranks);
    case CollKind::kAllgatherv:
    case CollKind::kReducescatterv:
      return sum_counts(a.counts, a.nranks) * es;
    default: return a.count * es;
  }
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

Status build_schedule(const OpArgs& a, Algo algo, const std::shared_ptr<ScratchPool>& pool,
                      Schedule* out, Algo* used) {
  *out = fresh_schedule(a, pool);
  *used = algo;
  BuildFn fn = builder_for(a.kind, algo);
  Status st = fn ? fn(a, *out) : Status::kUnsupported;
  if (st != Status::kUnsupported) return st;
  candidates(a.kind, used, 1);  // declined: the collective's default algorithm
  *out = fresh_schedule(a, pool);
  return builder_for(a.kind, *used)(a, *out);
}

}  // namespace zcx::coll
