// Pure rank math: every parent/child link is consistent, every tree spans all ranks, the two
// trees of the double binary tree share inner nodes as described, schedules are permutations.
#include "patterns/alltoall.h"
#include "patterns/rhd.h"
#include "patterns/ring.h"
#include "patterns/tree.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace zcx::coll::patterns {
namespace {

// Checks parent/child symmetry, a single root, and that every rank reaches the root.
template <class GetParent, class GetChildren>
void check_tree(int n, int want_root, GetParent parent_of, GetChildren children_of) {
  int roots = 0;
  for (int r = 0; r < n; ++r) {
    int p = parent_of(r);
    if (p < 0) {
      ++roots;
      EXPECT_EQ(r, want_root);
      continue;
    }
    ASSERT_GE(p, 0);
    ASSERT_LT(p, n);
    std::vector<int> pc = children_of(p);
    EXPECT_EQ(std::count(pc.begin(), pc.end(), r), 1) << "rank " << r << " parent " << p;
    for (int c : children_of(r)) {
      ASSERT_GE(c, 0);
      ASSERT_LT(c, n);
      EXPECT_EQ(parent_of(c), r);
    }
    int hops = 0, x = r;  // no cycles: the root is reached in < n hops
    while (parent_of(x) >= 0 && hops <= n) x = parent_of(x), ++hops;
    EXPECT_EQ(x, want_root) << "rank " << r;
  }
  EXPECT_EQ(roots, 1);
}

std::vector<int> kids(const TreeNode& t) {
  std::vector<int> v;
  for (int c : t.children)
    if (c >= 0) v.push_back(c);
  return v;
}

TEST(DoubleBinaryTree, BothTreesAreValidAndComplementary) {
  for (int n = 1; n <= 130; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    for (int t = 0; t < 2; ++t) {
      int root = t == 0 ? 0 : (n % 2 == 0 ? n - 1 : 1 % n);
      check_tree(n, root, [&](int r) { return dbtree_node(r, n, t).parent; },
                 [&](int r) { return kids(dbtree_node(r, n, t)); });
    }
    int inner_both = 0;
    for (int r = 0; r < n; ++r) {
      bool in0 = dbtree_node(r, n, 0).nchildren() > 0;
      bool in1 = dbtree_node(r, n, 1).nchildren() > 0;
      if (in0 && in1) {
        ++inner_both;
        EXPECT_TRUE(n % 2 == 1 && r == 0) << "rank " << r << " inner in both trees";
      }
    }
    EXPECT_LE(inner_both, n % 2);
  }
}

TEST(DoubleBinaryTree, MatchesTheDescribedShape) {
  // n = 8: tree 0 is 0 -> 4 -> {2, 6}, 2 -> {1, 3}, 6 -> {5, 7}; tree 1 mirrors it.
  EXPECT_EQ(btree_node(0, 8).children[0], 4);
  EXPECT_EQ(kids(btree_node(4, 8)), (std::vector<int>{2, 6}));
  EXPECT_EQ(kids(btree_node(6, 8)), (std::vector<int>{5, 7}));
  EXPECT_EQ(btree_node(7, 8).parent, 6);
  EXPECT_EQ(kids(dbtree_node(3, 8, 1)), (std::vector<int>{5, 1}));
  EXPECT_EQ(dbtree_node(7, 8, 1).parent, -1);
}

TEST(Knomial, TreesAreValidForEveryRootAndRadix) {
  for (int k = 2; k <= 8; ++k)
    for (int n = 1; n <= 40; ++n)
      for (int root = 0; root < n; ++root) {
        SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(n) +
                     " root=" + std::to_string(root));
        check_tree(n, root, [&](int r) { return knomial_node(r, n, root, k).parent; },
                   [&](int r) {
                     KnomialNode kn = knomial_node(r, n, root, k);
                     return std::vector<int>(kn.children, kn.children + kn.nchildren);
                   });
      }
  // Binomial depth is ceil(lg n): the root of 16 ranks has 4 children.
  EXPECT_EQ(knomial_node(0, 16, 0, 2).nchildren, 4);
  EXPECT_EQ(knomial_node(0, 16, 0, 2).children[0], 8);
}

TEST(Ring, BlocksCoverEveryBlockOnceAndFlowAlongTheRing) {
  for (int n = 1; n <= 17; ++n)
    for (int step = 0; step + 1 < n; ++step)
      for (int r = 0; r < n; ++r) {
        // What r sends at a step is what next receives at that step.
        EXPECT_EQ(ring_rs_send_block(r, step, n), ring_rs_recv_block(ring_next(r, n), step, n));
        EXPECT_EQ(ring_ag_send_block(r, step, n), ring_ag_recv_block(ring_next(r, n), step, n));
        // The block r reduces at step s is the one it sends at step s+1.
        if (step + 2 < n) {
          EXPECT_EQ(ring_rs_recv_block(r, step, n), ring_rs_send_block(r, step + 1, n));
        }
      }
  for (int n = 2; n <= 17; ++n)
    for (int r = 0; r < n; ++r) {  // the last reduced block is the rank's own
      EXPECT_EQ(ring_rs_recv_block(r, n - 2, n), r);
      EXPECT_EQ(ring_ag_send_block(r, 0, n), r);
    }
}

TEST(Ring, BlockOffsetsPartitionTheCount) {
  for (size_t count : {0ul, 1ul, 5ul, 7ul, 1000003ul})
    for (size_t parts = 1; parts <= 9; ++parts) {
      size_t sum = 0;
      for (size_t i = 0; i < parts; ++i) {
        EXPECT_EQ(block_offset(count, parts, i), sum);
        size_t c = block_count(count, parts, i);
        EXPECT_LE(c, count / parts + 1);
        sum += c;
      }
      EXPECT_EQ(sum, count);
    }
}

TEST(Chain, RootedChainVisitsEveryRank) {
  for (int n = 1; n <= 9; ++n)
    for (int root = 0; root < n; ++root) {
      int x = root, seen = 1;
      EXPECT_EQ(chain_prev(root, root, n), -1);
      while (chain_next(x, root, n) >= 0) {
        int next = chain_next(x, root, n);
        EXPECT_EQ(chain_prev(next, root, n), x);
        x = next, ++seen;
      }
      EXPECT_EQ(seen, n);
    }
}

TEST(Rhd, LayoutPairsEveryExcludedRankAndMapsVirtualRanks) {
  for (int n = 1; n <= 70; ++n) {
    std::set<int> vranks;
    for (int r = 0; r < n; ++r) {
      RhdLayout l = rhd_layout(r, n);
      EXPECT_EQ(l.pof2 + l.rem, n);
      EXPECT_LE(l.rem, l.pof2 - (n == 1 ? 0 : 1));
      if (l.vrank < 0) {
        ASSERT_GE(l.partner, 0);
        EXPECT_GE(rhd_layout(l.partner, n).vrank, 0);
        EXPECT_EQ(rhd_layout(l.partner, n).partner, r);
      } else {
        EXPECT_EQ(rhd_real_rank(l, l.vrank), r);
        EXPECT_TRUE(vranks.insert(l.vrank).second);
      }
    }
    EXPECT_EQ(static_cast<int>(vranks.size()), rhd_layout(0, n).pof2);
    EXPECT_EQ(*vranks.rbegin(), rhd_layout(0, n).pof2 - 1);
  }
}

TEST(Pairwise, EveryPairExchangesExactlyOnce) {
  for (int n = 1; n <= 20; ++n) {
    std::set<std::pair<int, int>> sends;
    for (int step = 1; step < n; ++step)
      for (int r = 0; r < n; ++r) {
        PairwiseStep s = pairwise_step(r, n, step);
        EXPECT_NE(s.send_to, r);
        EXPECT_TRUE(sends.insert({r, s.send_to}).second);
        // Whoever r sends to receives from r in the same step.
        EXPECT_EQ(pairwise_step(s.send_to, n, step).recv_from, r);
      }
    EXPECT_EQ(sends.size(), static_cast<size_t>(n) * (n - 1));
  }
}

}  // namespace
}  // namespace zcx::coll::patterns
