// Tree rank math (no I/O): the double binary tree NCCL describes (two complementary binary
// trees, half the data through each), and k-nomial trees (binomial when k = 2).
#pragma once

namespace zcx::coll::patterns {

struct TreeNode {
  int parent = -1;          // -1 at the root
  int children[2] = {-1, -1};
  int nchildren() const { return (children[0] >= 0) + (children[1] >= 0); }
};

// Tree 0 is an in-order binary tree over 0..n-1 whose level is the lowest set bit of the
// rank: odd ranks are leaves, rank 0 is the root with the single child 2^floor(lg(n-1)).
TreeNode btree_node(int rank, int n);
// Tree t (0 or 1) of the double binary tree. Tree 1 mirrors tree 0 (r -> n-1-r) for even n,
// so every rank is an inner node in at most one tree; for odd n it is tree 0 shifted by one
// rank (r -> r+1 mod n), where only rank 0 can be inner in both.
TreeNode dbtree_node(int rank, int n, int tree);

// k-nomial tree rooted at root, 2 <= k <= 16. Children are listed farthest subtree first.
struct KnomialNode {
  int parent = -1;
  int nchildren = 0;
  int children[128];  // at most (k-1) * ceil(log_k n) <= 120 for 2 <= k <= 16, n < 2^31
};
KnomialNode knomial_node(int rank, int n, int root, int k);

}  // namespace zcx::coll::patterns
