// The cost model picks what the formulas say it should, honours ZCX_ALGO/ZCX_CHUNK_SIZE,
// and explains itself.
#include "select/select.h"

#include "common/config.h"

#include <gtest/gtest.h>

namespace zcx::coll {
namespace {

SelectInput input(CollKind k, size_t bytes, int p, LinkClass link = LinkClass::kNet) {
  SelectInput in;
  in.kind = k;
  in.bytes = bytes;
  in.nranks = p;
  in.link = link;
  return in;
}

TEST(CostModel, FormulasAtKnownPoints) {
  ModelParams m{{1.0, 10.0}, {1.0, 1.0}, 1e9};  // net: alpha 10us, 1 GB/s = 1e3 B/us
  SelectInput in = input(CollKind::kAllreduce, 8000, 8);
  // ring: 2(p-1) a + 2(p-1)/p n b = 140 + 14 = 154 (gamma ~ 0)
  EXPECT_NEAR(estimate_us(Algo::kRing, in, m, 0), 154.0, 1e-3);
  // rhd: 2 lg p a + 2(p-1)/p n b = 60 + 14
  EXPECT_NEAR(estimate_us(Algo::kRhd, in, m, 0), 74.0, 1e-3);
  // pairwise alltoall: (p-1)(a + n/p b) = 7 * 11
  EXPECT_NEAR(estimate_us(Algo::kPairwise, input(CollKind::kAlltoall, 8000, 8), m, 0), 77.0, 1e-3);
  // binomial broadcast: lg p (a + n b) = 3 * 18
  EXPECT_NEAR(estimate_us(Algo::kBinomial, input(CollKind::kBroadcast, 8000, 8), m, 0), 54.0, 1e-3);
  // chain broadcast with 4 chunks: (p - 2 + k)(a + n/k b) = 10 * 12
  EXPECT_NEAR(estimate_us(Algo::kChain, input(CollKind::kBroadcast, 8000, 8), m, 2000), 120.0, 1e-3);
  // direct: a + (p-2) a/2 + (p-1) n b = 10 + 30 + 7 * 0.064
  EXPECT_NEAR(estimate_us(Algo::kDirect, input(CollKind::kAllreduce, 64, 8), m, 0), 40.448, 1e-3);
  // non power of two adds the pre/post step to rhd
  EXPECT_GT(estimate_us(Algo::kRhd, input(CollKind::kAllreduce, 8000, 6), m, 0),
            estimate_us(Algo::kRhd, input(CollKind::kAllreduce, 8000, 4), m, 0) + 2 * 10.0);
}

// The bulk lane's pieces: at most 1 MiB, a multiple of 4 KiB, n(n+1) of them within the
// budget; none when fewer than 4 KiB each would fit.
TEST(SharedLane, BulkPieceFitsTheBudget) {
  EXPECT_EQ(shared_bulk_piece(2, 8u << 20), size_t{1} << 20);
  EXPECT_EQ(shared_bulk_piece(4, 8u << 20), (size_t{8} << 20) / 20 / 4096 * 4096);
  EXPECT_EQ(shared_bulk_piece(64, 8u << 20), 0u);  // 4160 pieces of 2016 bytes: too small
  EXPECT_EQ(shared_bulk_piece(2, 0), 0u);
  EXPECT_EQ(shared_bulk_piece(1, 8u << 20), 0u);
  for (int n = 2; n <= kSharedMaxRanks; ++n) {
    const size_t piece = shared_bulk_piece(n, 8u << 20);
    EXPECT_EQ(piece % 4096, 0u) << n;
    EXPECT_LE(piece * n * (n + 1), size_t{8} << 20) << n;
  }
}

// Only allreduce, reduce, broadcast, allgather and reducescatter larger than a slot go
// through the bulk lane, and only where the communicator has one; the model then prefers it
// to the ring among the ranks of a host.
TEST(SharedLane, BulkLaneCarriesLargeCollectivesOnly) {
  SelectInput in = input(CollKind::kAllreduce, 64u << 20, 2, LinkClass::kShm);
  in.shared_lane = true;
  EXPECT_FALSE(shared_lane_fits(in));  // no bulk piece
  in.shared_bulk_piece = 1u << 20;
  EXPECT_TRUE(shared_lane_bulk(in));
  EXPECT_TRUE(shared_lane_fits(in));
  Choice c = select(in);
  EXPECT_EQ(c.algo, Algo::kShared) << c.why;
  EXPECT_NE(c.why.find(" shared "), std::string::npos) << c.why;
  for (CollKind k : {CollKind::kReduce, CollKind::kReducescatter}) {
    SelectInput other = in;
    other.kind = k;
    EXPECT_TRUE(shared_lane_bulk(other)) << coll_kind_name(k);
    EXPECT_EQ(select(other).algo, Algo::kShared) << select(other).why;
  }
  // Broadcast and allgather go there (they only copy) when forced, or when the ranks share
  // CPUs and the lane's fewer copies in all win: 4 ranks; with 2, an allgather's ring
  // copies less than the lane's stage-in and copy-out.
  for (CollKind k : {CollKind::kBroadcast, CollKind::kAllgather}) {
    SelectInput other = in;
    other.kind = k;
    EXPECT_TRUE(shared_lane_bulk(other)) << coll_kind_name(k);
    EXPECT_NE(select(other).algo, Algo::kShared) << select(other).why;
    SelectInput crowded = other;
    crowded.nranks = 4;
    crowded.oversubscribed = Oversubscribed::kYes;
    EXPECT_EQ(select(crowded).algo, Algo::kShared) << select(crowded).why;
    EXPECT_NE(select(crowded).why.find("p=4 shm oversubscribed:"), std::string::npos);
    crowded.oversubscribed = Oversubscribed::kUnknown;  // before the lane's set-up
    EXPECT_EQ(select(crowded).algo, Algo::kShared) << select(crowded).why;
    EXPECT_NE(select(crowded).why.find("p=4 shm oversubscribed?:"), std::string::npos);
    config::ScopedOverride force("ZCX_ALGO", std::string(coll_kind_name(k)) + ":shared");
    EXPECT_EQ(select(other).algo, Algo::kShared) << select(other).why;
  }
  SelectInput pair = in;
  pair.kind = CollKind::kAllgather;
  pair.oversubscribed = Oversubscribed::kYes;
  EXPECT_EQ(select(pair).algo, Algo::kRing) << select(pair).why;
  for (CollKind k : {CollKind::kAlltoall, CollKind::kAllgatherv, CollKind::kReducescatterv}) {
    SelectInput other = in;
    other.kind = k;
    EXPECT_FALSE(shared_lane_fits(other)) << coll_kind_name(k);
  }
  SelectInput small = in;
  small.bytes = 64;
  EXPECT_FALSE(shared_lane_bulk(small));  // the slot carries it
  EXPECT_TRUE(shared_lane_fits(small));
  small.kind = CollKind::kReducescatter;  // 32 bytes per block: no slot form, so the bulk lane
  EXPECT_TRUE(shared_lane_bulk(small));
  small.bytes = 0;
  EXPECT_FALSE(shared_lane_fits(small));
}

TEST(Select, LatencyBoundSmallAndBandwidthBoundLarge) {
  Choice small = select(input(CollKind::kAllreduce, 64, 16));
  EXPECT_EQ(small.algo, Algo::kRhd) << small.why;
  // Few ranks and a tiny vector: one direct exchange beats two steps.
  Choice pair = select(input(CollKind::kAllreduce, 8, 2, LinkClass::kShm));
  EXPECT_EQ(pair.algo, Algo::kDirect) << pair.why;
  Choice pair_large = select(input(CollKind::kAllreduce, 1u << 20, 2, LinkClass::kShm));
  EXPECT_NE(pair_large.algo, Algo::kDirect) << pair_large.why;
  Choice large = select(input(CollKind::kAllreduce, 256u << 20, 16));
  EXPECT_EQ(large.algo, Algo::kRing) << large.why;
  EXPECT_GT(large.chunk, 0u);
  EXPECT_NE(large.why.find("ring"), std::string::npos);
  EXPECT_NE(large.why.find("-> ring (model)"), std::string::npos) << large.why;
  Choice bc_small = select(input(CollKind::kBroadcast, 64, 16));
  EXPECT_EQ(bc_small.algo, Algo::kBinomial) << bc_small.why;
  Choice bc_large = select(input(CollKind::kBroadcast, 64u << 20, 16));
  EXPECT_EQ(bc_large.algo, Algo::kChain) << bc_large.why;
  EXPECT_EQ(select(input(CollKind::kAlltoallv, 1000, 5)).algo, Algo::kPairwise);
}

TEST(Select, ModelChunkMinimisesThePipelinedChain) {
  ModelParams m = model_params();
  SelectInput in = input(CollKind::kBroadcast, 64u << 20, 16);
  size_t c = model_chunk(Algo::kChain, in, m);
  double best = estimate_us(Algo::kChain, in, m, c);
  EXPECT_LE(best, estimate_us(Algo::kChain, in, m, c * 4) + 1e-6);
  EXPECT_LE(best, estimate_us(Algo::kChain, in, m, c / 4) + 1e-6);
}

TEST(Select, EnvironmentOverrides) {
  {
    config::ScopedOverride algo("ZCX_ALGO", "allreduce:tree,broadcast:chain");
    config::ScopedOverride chunk("ZCX_CHUNK_SIZE", "128K");
    Choice c = select(input(CollKind::kAllreduce, 64, 16));
    EXPECT_EQ(c.algo, Algo::kTree);
    EXPECT_EQ(c.chunk, 128u << 10);
    EXPECT_NE(c.why.find("ZCX_ALGO"), std::string::npos) << c.why;
    EXPECT_EQ(select(input(CollKind::kBroadcast, 64, 16)).algo, Algo::kChain);
    EXPECT_EQ(select(input(CollKind::kAlltoall, 64, 16)).algo, Algo::kPairwise);
  }
  {
    config::ScopedOverride algo("ZCX_ALGO", "pairwise");  // not an allreduce: model decides
    EXPECT_NE(select(input(CollKind::kAllreduce, 64, 16)).algo, Algo::kPairwise);
  }
  {
    // A slow-start network (huge alpha) makes a 16 MiB allreduce latency bound.
    EXPECT_EQ(select(input(CollKind::kAllreduce, 16 << 20, 16)).algo, Algo::kRing);
    config::ScopedOverride alpha("ZCX_COLL_ALPHA_US_NET", "5000");
    EXPECT_EQ(select(input(CollKind::kAllreduce, 16 << 20, 16)).algo, Algo::kRhd);
  }
}

}  // namespace
}  // namespace zcx::coll
