// Double binary tree and k-nomial tree construction.
#include "patterns/tree.h"

namespace zcx::coll::patterns {

namespace {

int lowest_bit(int rank, int n) {
  int bit = 1;
  while (bit < n && !(bit & rank)) bit <<= 1;
  return bit;  // for rank 0: the first power of two >= n
}

}  // namespace

TreeNode btree_node(int rank, int n) {
  TreeNode node;
  int bit = lowest_bit(rank, n);
  if (rank != 0) {
    // The parent sits one level up: clear our bit and set the next one, or, if that is
    // past the end, the node just below us on the left (rank - bit).
    int up = (rank ^ bit) | (bit << 1);
    node.parent = up < n ? up : (rank ^ bit);
  }
  int half = bit >> 1;
  if (rank == 0) {  // the root has one child: the top of the tree
    node.children[0] = n > 1 ? half : -1;
    return node;
  }
  if (half == 0) return node;  // odd: leaf
  node.children[0] = rank - half;
  while (half > 0 && rank + half >= n) half >>= 1;
  node.children[1] = half > 0 ? rank + half : -1;
  return node;
}

TreeNode dbtree_node(int rank, int n, int tree) {
  if (tree == 0) return btree_node(rank, n);
  bool mirror = n % 2 == 0;
  auto to_t0 = [&](int r) { return mirror ? n - 1 - r : (r + n - 1) % n; };
  auto from_t0 = [&](int r) { return r < 0 ? -1 : (mirror ? n - 1 - r : (r + 1) % n); };
  TreeNode t0 = btree_node(to_t0(rank), n);
  TreeNode node;
  node.parent = from_t0(t0.parent);
  node.children[0] = from_t0(t0.children[0]);
  node.children[1] = from_t0(t0.children[1]);
  return node;
}

KnomialNode knomial_node(int rank, int n, int root, int k) {
  KnomialNode node;
  int v = (rank - root + n) % n;  // virtual rank: root is 0
  long w = 1;
  // Our level: the weight of our lowest non-zero base-k digit (n for the root).
  while (w < n && (v / w) % k == 0) w *= k;
  if (v != 0) node.parent = static_cast<int>((v - ((v / w) % k) * w + root) % n);
  for (long cw = w / k; cw >= 1; cw /= k)
    for (int j = k - 1; j >= 1; --j) {
      long c = v + j * cw;
      if (c < n && node.nchildren < 128) node.children[node.nchildren++] = static_cast<int>((c + root) % n);
    }
  return node;
}

}  // namespace zcx::coll::patterns
