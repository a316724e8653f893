// Pipelined chain broadcast (NCCL's ring broadcast): root -> root+1 -> ... in chunks, each
// rank forwarding chunk k as soon as it has it: (p - 2 + k) chunk times in all.
#include "algorithms/algorithms.h"
#include "patterns/ring.h"

#include <vector>

namespace zcx::coll {

Status build_broadcast_chain(const OpArgs& a, Schedule& s) {
  const size_t es = a.esize(), bytes = a.count * es;
  const size_t aligned = a.chunk / es * es;
  const size_t chunk = aligned ? aligned : (bytes ? bytes : 1);
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  int prev = patterns::chain_prev(a.rank, a.root, a.nranks);
  int next = patterns::chain_next(a.rank, a.root, a.nranks);
  size_t nchunks = (bytes + chunk - 1) / chunk;
  auto len = [&](size_t k) { return bytes - k * chunk < chunk ? bytes - k * chunk : chunk; };
  if (a.rank == a.root) {
    auto* in = static_cast<const uint8_t*>(a.sendbuf);
    s.copy(out, in, bytes);
    for (size_t k = 0; k < nchunks && next >= 0; ++k) s.send(next, in + k * chunk, len(k));
    return Status::kSuccess;
  }
  std::vector<int> got(nchunks);
  for (size_t k = 0; k < nchunks; ++k) got[k] = s.recv(prev, out + k * chunk, len(k));
  for (size_t k = 0; k < nchunks && next >= 0; ++k)
    s.send(next, out + k * chunk, len(k), {got[k]});
  return Status::kSuccess;
}

}  // namespace zcx::coll
