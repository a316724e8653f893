// Pipelined chain reduce (NCCL's ring reduce): partial sums flow from the far end of the
// chain toward the root, chunk by chunk.
#include "algorithms/algorithms.h"
#include "patterns/ring.h"

#include <vector>

namespace zcx::coll {

Status build_reduce_chain(const OpArgs& a, Schedule& s) {
  const size_t es = a.esize(), bytes = a.count * es;
  const size_t aligned = a.chunk / es * es;
  const size_t chunk = aligned ? aligned : (bytes ? bytes : 1);
  auto* in = static_cast<const uint8_t*>(a.sendbuf);
  int toward_root = patterns::chain_prev(a.rank, a.root, a.nranks);
  int from_far = patterns::chain_next(a.rank, a.root, a.nranks);
  size_t nchunks = (bytes + chunk - 1) / chunk;
  auto len = [&](size_t k) { return bytes - k * chunk < chunk ? bytes - k * chunk : chunk; };
  if (from_far < 0) {  // far end (or a single rank)
    if (toward_root < 0) s.copy(a.recvbuf, in, bytes);
    for (size_t k = 0; k < nchunks && toward_root >= 0; ++k)
      s.send(toward_root, in + k * chunk, len(k));
    return Status::kSuccess;
  }
  auto* acc = static_cast<uint8_t*>(toward_root < 0 ? a.recvbuf : s.scratch(bytes));
  auto* tmp = static_cast<uint8_t*>(s.scratch(bytes));
  std::vector<int> got(nchunks);
  for (size_t k = 0; k < nchunks; ++k) got[k] = s.recv(from_far, tmp + k * chunk, len(k));
  for (size_t k = 0; k < nchunks; ++k) {
    int x = s.reduce(acc + k * chunk, in + k * chunk, tmp + k * chunk, len(k), {got[k]});
    if (toward_root >= 0) s.send(toward_root, acc + k * chunk, len(k), {x});
  }
  return Status::kSuccess;
}

}  // namespace zcx::coll
