// Binomial-tree broadcast: lg p rounds of whole-buffer sends, farthest subtree first.
#include "algorithms/algorithms.h"
#include "patterns/tree.h"

namespace zcx::coll {

Status build_broadcast_binomial(const OpArgs& a, Schedule& s) {
  const size_t bytes = a.count * a.esize();
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  patterns::KnomialNode node = patterns::knomial_node(a.rank, a.nranks, a.root, 2);
  const uint8_t* src = out;
  int ready = kNoTask;
  if (a.rank == a.root) {
    src = static_cast<const uint8_t*>(a.sendbuf);
    s.copy(out, src, bytes);
  } else {
    ready = s.recv(node.parent, out, bytes);
  }
  for (int j = 0; j < node.nchildren; ++j) s.send(node.children[j], src, bytes, {ready});
  return Status::kSuccess;
}

}  // namespace zcx::coll
