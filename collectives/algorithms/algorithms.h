// One builder per algorithm: each writes this rank's tasks for one operation into a
// Schedule. A builder may decline (kUnsupported) a case it does not serve; the planner
// then uses the collective's default algorithm.
#pragma once

#include "common/status.h"
#include "reduce/reduce.h"
#include "schedule/schedule.h"
#include "select/select.h"

#include <zcx/coll.h>

#include <cstddef>

namespace zcx::coll {

struct OpArgs {
  CollKind kind = CollKind::kAllreduce;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;                  // elements (per-rank block for AG/RS/alltoall)
  zcx_dtype_t dtype = ZCX_UINT8;
  zcx_redop_t op = ZCX_SUM;
  int root = -1;                     // broadcast/reduce; peer for send/recv
  const size_t* counts = nullptr;    // allgatherv/reducescatterv recvcounts; alltoallv send
  const size_t* displs = nullptr;    // allgatherv displs; alltoallv sdispls
  const size_t* rcounts = nullptr;   // alltoallv
  const size_t* rdispls = nullptr;   // alltoallv
  int rank = 0;
  int nranks = 1;
  size_t chunk = 0;                  // pipeline chunk in bytes (0 = whole blocks)
  const int* host_of = nullptr;      // host index of every rank (hierarchical algorithms)
  int device = -1;                   // CUDA device of the buffers (stream-ordered call), or -1
  size_t esize() const { return dtype_bytes(dtype); }
};

Status build_allreduce_ring(const OpArgs& a, Schedule& s);
Status build_allreduce_tree(const OpArgs& a, Schedule& s);
Status build_allreduce_rhd(const OpArgs& a, Schedule& s);
Status build_allreduce_hier(const OpArgs& a, Schedule& s);
Status build_allreduce_direct(const OpArgs& a, Schedule& s);
Status build_reducescatter_ring(const OpArgs& a, Schedule& s);  // and the V form
Status build_allgather_ring(const OpArgs& a, Schedule& s);      // and the V form
Status build_broadcast_binomial(const OpArgs& a, Schedule& s);
Status build_broadcast_chain(const OpArgs& a, Schedule& s);
Status build_reduce_binomial(const OpArgs& a, Schedule& s);
Status build_reduce_chain(const OpArgs& a, Schedule& s);
Status build_alltoall_pairwise(const OpArgs& a, Schedule& s);   // and the V form
Status build_barrier(const OpArgs& a, Schedule& s);
Status build_sendrecv(const OpArgs& a, Schedule& s);            // root = peer; kind kSendRecv

// Shared lane (algorithms/shared.cc; no schedule): what this rank publishes for the call
// (*data and the byte count), and its result computed from every member's slot.
class SharedLane;
size_t shared_contribution(const OpArgs& a, const void** data);
void shared_finish(const OpArgs& a, const SharedLane& lane, uint64_t seq);

// One rank: the result is the input. Adds the copy (none in place) and returns true when
// a.nranks == 1, so that a builder can `if (single_rank_copy(a, s, bytes)) return ...;`.
inline bool single_rank_copy(const OpArgs& a, Schedule& s, size_t bytes) {
  if (a.nranks != 1) return false;
  s.copy(a.recvbuf, a.sendbuf, bytes);
  return true;
}

// The sum of n per-rank counts (0 without counts).
inline size_t sum_counts(const size_t* counts, int n) {
  size_t total = 0;
  for (int i = 0; counts != nullptr && i < n; ++i) total += counts[i];
  return total;
}

// A call's size as the selector sees it (and zcx-perf and nccl-tests count it): the same on
// every rank for every collective that selects.
size_t select_bytes(const OpArgs& a);

// The builder for (kind, algo), or nullptr when that algorithm does not implement it.
using BuildFn = Status (*)(const OpArgs&, Schedule&);
BuildFn builder_for(CollKind kind, Algo algo);
// a.rank's schedule for `algo` in *out (scratch from `pool`), or for the collective's default
// algorithm when `algo` declines the call; *used: the algorithm that built it.
Status build_schedule(const OpArgs& a, Algo algo, const std::shared_ptr<ScratchPool>& pool,
                      Schedule* out, Algo* used);

}  // namespace zcx::coll
