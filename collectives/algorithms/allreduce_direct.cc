// Direct allreduce for small vectors: every rank sends its whole vector to every other rank
// at once and reduces all n vectors locally, in rank order 0, 1, ..., n-1, so that every
// rank computes the bit-identical result. One step (latency a), at the price of (n-1)
// copies of the vector per rank: the selector uses it only for small vectors, where the
// 2 lg p or 2(p-1) steps of the other algorithms cost more than the extra bytes.
#include "algorithms/algorithms.h"

#include <vector>

namespace zcx::coll {

Status build_allreduce_direct(const OpArgs& a, Schedule& s) {
  const size_t bytes = a.count * a.esize();
  const int n = a.nranks, me = a.rank;
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  const auto* in = static_cast<const uint8_t*>(a.sendbuf);
  if (single_rank_copy(a, s, bytes)) return Status::kSuccess;
  auto* slots = static_cast<uint8_t*>(s.scratch(bytes * static_cast<size_t>(n)));
  // In place, the first reduction overwrites this rank's own vector, which later steps
  // and the sends still read: keep a copy in this rank's slot and work from it.
  const uint8_t* own = in;
  int own_ready = kNoTask;
  if (static_cast<const void*>(in) == out) {
    own_ready = s.copy(slots + bytes * me, in, bytes);
    own = slots + bytes * me;
  }
  std::vector<int> arrived(n, kNoTask);
  for (int p = 0; p < n; ++p)
    if (p != me) arrived[p] = s.recv(p, slots + bytes * p, bytes);
  for (int k = 1; k < n; ++k) s.send((me + k) % n, own, bytes, {own_ready});
  auto vec = [&](int p) { return p == me ? own : slots + bytes * p; };
  int prev = s.reduce(out, vec(0), vec(1), bytes, {arrived[0], arrived[1], own_ready});
  for (int p = 2; p < n; ++p) prev = s.reduce(out, out, vec(p), bytes, {prev, arrived[p], own_ready});
  return Status::kSuccess;
}

}  // namespace zcx::coll
