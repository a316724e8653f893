// Pairwise-exchange alltoall (and alltoallv): p-1 steps, one send and one receive each
// (patterns/alltoall.h), all posted up front. alltoallv messages carry their own descriptor
// so that a sendcount that disagrees with the peer's recvcount is a kMismatch. In place,
// the send side is copied to scratch first.
#include "algorithms/algorithms.h"
#include "patterns/alltoall.h"

#include <vector>

namespace zcx::coll {

Status build_alltoall_pairwise(const OpArgs& a, Schedule& s) {
  const size_t es = a.esize();
  const int n = a.nranks, r = a.rank;
  const bool v = a.kind == CollKind::kAlltoallv;
  std::vector<size_t> soff(n), slen(n), roff(n), rlen(n);
  size_t send_extent = 0;
  for (int p = 0; p < n; ++p) {
    soff[p] = (v ? a.displs[p] : p * a.count) * es;
    slen[p] = (v ? a.counts[p] : a.count) * es;
    roff[p] = (v ? a.rdispls[p] : p * a.count) * es;
    rlen[p] = (v ? a.rcounts[p] : a.count) * es;
    send_extent = soff[p] + slen[p] > send_extent ? soff[p] + slen[p] : send_extent;
  }
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  auto* src = static_cast<const uint8_t*>(a.sendbuf);
  int copied = kNoTask;
  if (src == out) {
    auto* saved = static_cast<uint8_t*>(s.scratch(send_extent));
    copied = s.copy(saved, src, send_extent);
    src = saved;
  }
  if (v && slen[r] != rlen[r])
    return set_error(Status::kInvalidArg, kLogColl,
                     "alltoallv: sendcounts[%d] (%zu) differs from recvcounts[%d] (%zu) for "
                     "this rank's own block", r, slen[r] / es, r, rlen[r] / es);
  s.copy(out + roff[r], src + soff[r], rlen[r], {copied});
  for (int step = 1; step < n; ++step) {
    patterns::PairwiseStep p = patterns::pairwise_step(r, n, step);
    if (v) {
      s.recv_checked(p.recv_from, out + roff[p.recv_from], rlen[p.recv_from], {copied});
      s.send_checked(p.send_to, src + soff[p.send_to], slen[p.send_to], {copied});
    } else {
      s.recv(p.recv_from, out + roff[p.recv_from], rlen[p.recv_from], {copied});
      s.send(p.send_to, src + soff[p.send_to], slen[p.send_to], {copied});
    }
  }
  return Status::kSuccess;
}

}  // namespace zcx::coll
