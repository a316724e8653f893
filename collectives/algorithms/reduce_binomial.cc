// Binomial-tree reduce: each rank adds its children's vectors (in a fixed order, so the
// result is the same whoever runs it) and passes the sum to its parent.
#include "algorithms/algorithms.h"
#include "patterns/tree.h"

#include <vector>

namespace zcx::coll {

Status build_reduce_binomial(const OpArgs& a, Schedule& s) {
  const size_t bytes = a.count * a.esize();
  auto* in = static_cast<const uint8_t*>(a.sendbuf);
  bool root = a.rank == a.root;
  patterns::KnomialNode node = patterns::knomial_node(a.rank, a.nranks, a.root, 2);
  if (node.nchildren == 0) {
    if (root) s.copy(a.recvbuf, in, bytes);
    else s.send(node.parent, in, bytes);
    return Status::kSuccess;
  }
  auto* acc = static_cast<uint8_t*>(root ? a.recvbuf : s.scratch(bytes));
  std::vector<int> got(node.nchildren);
  std::vector<uint8_t*> tmp(node.nchildren);
  for (int j = 0; j < node.nchildren; ++j) {
    tmp[j] = static_cast<uint8_t*>(s.scratch(bytes));
    got[j] = s.recv(node.children[j], tmp[j], bytes);
  }
  int x = kNoTask;
  const uint8_t* left = in;
  for (int j = 0; j < node.nchildren; ++j) {
    x = s.reduce(acc, left, tmp[j], bytes, {got[j], x});
    left = acc;
  }
  if (!root) s.send(node.parent, acc, bytes, {x});
  return Status::kSuccess;
}

}  // namespace zcx::coll
