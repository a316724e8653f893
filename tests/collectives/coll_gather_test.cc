// Allgather, reduce-scatter, alltoall and their V forms, point-to-point groups, barrier, over
// the in-memory transport for N in {1,2,3,4,5,8}, in place and out of place.
#include "coll_test_util.h"

#include "common/config.h"

#include <numeric>

namespace zcx::coll::fake {
namespace {

class GatherTest : public ::testing::TestWithParam<int> {};

OpArgs args(CollKind k, const void* s, void* r, size_t count) { return int32_args(k, s, r, count); }

TEST_P(GatherTest, Allgather) {
  const int n = GetParam();
  for (size_t count : test_counts(n)) {
    std::vector<int32_t> want(count * n);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i) want[q * count + i] = val(q, i);
    const std::vector<std::vector<int32_t>> values = every_rank_values(n, count);
    RankBuffers bufs(n, count, count * n);
    for (const char* chunk : {"0", "8"})
      for (bool inplace : {false, true}) {
        if (count > 100000 && chunk[0] != '0') continue;
        SCOPED_TRACE("count " + std::to_string(count) + " chunk " + chunk + (inplace ? " in place" : ""));
        config::ScopedOverride ch("ZCX_CHUNK_SIZE", chunk);
        run_ranks(n, [&](int r, Comm& c) {
          int32_t* in = bufs.in(r, values[r]);
          int32_t* out = bufs.out(r);
          if (inplace) std::copy(in, in + count, out + r * count);
          const void* send = inplace ? static_cast<const void*>(out + r * count) : in;
          ASSERT_EQ(run_op(c, args(CollKind::kAllgather, send, out, count)), Status::kSuccess)
              << last_error();
          EXPECT_TRUE(same_ints(want, out, count * n)) << "rank " << r;
        });
        if (HasFailure()) return;
      }
  }
}

TEST_P(GatherTest, Reducescatter) {
  const int n = GetParam();
  for (size_t count : test_counts(n)) {
    std::vector<int32_t> sums(count * n);  // rank r's result: elements [r * count, + count)
    for (size_t i = 0; i < count * n; ++i) sums[i] = sum_over_ranks(n, i);
    const std::vector<std::vector<int32_t>> values = every_rank_values(n, count * n);
    RankBuffers bufs(n, count * n, count);
    for (const char* chunk : {"0", "8"})
      for (bool inplace : {false, true}) {
        if (count > 100000 && chunk[0] != '0') continue;
        SCOPED_TRACE("count " + std::to_string(count) + " chunk " + chunk + (inplace ? " in place" : ""));
        config::ScopedOverride ch("ZCX_CHUNK_SIZE", chunk);
        run_ranks(n, [&](int r, Comm& c) {
          int32_t* in = bufs.in(r, values[r]);
          int32_t* recv = inplace ? in + r * count : bufs.out(r);
          ASSERT_EQ(run_op(c, args(CollKind::kReducescatter, in, recv, count)), Status::kSuccess)
              << last_error();
          const std::vector<int32_t> want(sums.begin() + r * count, sums.begin() + (r + 1) * count);
          EXPECT_TRUE(same_ints(want, recv, count)) << "rank " << r;
        });
        if (HasFailure()) return;
      }
  }
}

TEST_P(GatherTest, Alltoall) {
  const int n = GetParam();
  for (size_t count : test_counts(n)) {
    if (count > 100000 && n > 5) continue;  // 8 x 8 x 4 MB is a lot for a 2-core box
    const std::vector<std::vector<int32_t>> values = every_rank_values(n, count * n);
    RankBuffers bufs(n, count * n, count * n);
    for (bool inplace : {false, true}) {
      SCOPED_TRACE("count " + std::to_string(count) + (inplace ? " in place" : ""));
      run_ranks(n, [&](int r, Comm& c) {
        int32_t* in = bufs.in(r, values[r]);
        int32_t* recv = inplace ? in : bufs.out(r);
        ASSERT_EQ(run_op(c, args(CollKind::kAlltoall, in, recv, count)), Status::kSuccess)
            << last_error();
        std::vector<int32_t> want(count * n);
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < count; ++i) want[p * count + i] = val(p, r * count + i);
        EXPECT_TRUE(same_ints(want, recv, count * n)) << "rank " << r;
      });
      if (HasFailure()) return;
    }
  }
}

// Irregular counts, one of them zero, and gaps between blocks.
size_t vcount(int r) { return static_cast<size_t>((r * 3 + 1) % 5) * 7; }

TEST_P(GatherTest, AllgathervWithGapsAndEmptyBlocks) {
  const int n = GetParam();
  std::vector<size_t> counts(n), displs(n);
  size_t extent = 0;
  for (int q = 0; q < n; ++q) {
    counts[q] = vcount(q);
    displs[q] = extent + 3;  // a gap of 3 elements before every block
    extent = displs[q] + counts[q];
  }
  run_ranks(n, [&](int r, Comm& c) {
    std::vector<int32_t> in(counts[r]), out(extent, -1);
    for (size_t i = 0; i < counts[r]; ++i) in[i] = val(r, i);
    OpArgs a = args(CollKind::kAllgatherv, in.data(), out.data(), counts[r]);
    a.counts = counts.data();
    a.displs = displs.data();
    ASSERT_EQ(run_op(c, a), Status::kSuccess) << last_error();
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < counts[q]; ++i) ASSERT_EQ(out[displs[q] + i], val(q, i)) << q << " " << i;
      ASSERT_EQ(out[displs[q] - 1], -1) << "gap written";
    }
  });
}

TEST_P(GatherTest, ReducescattervAndAlltoallv) {
  const int n = GetParam();
  std::vector<size_t> counts(n);
  for (int q = 0; q < n; ++q) counts[q] = vcount(q);
  size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  run_ranks(n, [&](int r, Comm& c) {
    std::vector<int32_t> in(total), out(counts[r] + 1, -1);
    for (size_t i = 0; i < total; ++i) in[i] = val(r, i);
    OpArgs a = args(CollKind::kReducescatterv, in.data(), out.data(), 0);
    a.counts = counts.data();
    ASSERT_EQ(run_op(c, a), Status::kSuccess) << last_error();
    size_t off = std::accumulate(counts.begin(), counts.begin() + r, size_t{0});
    for (size_t i = 0; i < counts[r]; ++i) ASSERT_EQ(out[i], sum_over_ranks(n, off + i));
    EXPECT_EQ(out[counts[r]], -1);
  });
  // alltoallv: rank s sends (s + 2p) % 4 * 5 elements to p.
  auto cnt = [](int s, int p) { return static_cast<size_t>((s + 2 * p) % 4) * 5; };
  run_ranks(n, [&](int r, Comm& c) {
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t so = 0, ro = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = cnt(r, p), sd[p] = so, so += sc[p];
      rc[p] = cnt(p, r), rd[p] = ro, ro += rc[p];
    }
    std::vector<int32_t> in(so), out(ro, -1);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < sc[p]; ++i) in[sd[p] + i] = val(r, p * 1000 + i);
    OpArgs a = args(CollKind::kAlltoallv, in.data(), out.data(), 0);
    a.counts = sc.data(), a.displs = sd.data(), a.rcounts = rc.data(), a.rdispls = rd.data();
    ASSERT_EQ(run_op(c, a), Status::kSuccess) << last_error();
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < rc[p]; ++i) ASSERT_EQ(out[rd[p] + i], val(p, r * 1000 + i));
  });
}

TEST_P(GatherTest, GroupedSendRecvAroundTheRingAndBarrier) {
  const int n = GetParam();
  const size_t count = 1001;
  run_ranks(n, [&](int r, Comm& c) {
    // Everyone sends first: without a group (posted together) this would deadlock on a
    // rendezvous transport. One rank sends to itself (copies, paired in call order).
    std::vector<int32_t> out(count), in(count, -1), out2(3), in2(3, -1);
    for (size_t i = 0; i < count; ++i) out[i] = val(r, i);
    for (size_t i = 0; i < 3; ++i) out2[i] = val(r, 5000 + i);
    OpArgs s1 = args(CollKind::kSendRecv, out.data(), nullptr, count);
    s1.root = (r + 1) % n;
    OpArgs s2 = args(CollKind::kSendRecv, out2.data(), nullptr, 3);
    s2.root = (r + 1) % n;
    OpArgs r1 = args(CollKind::kSendRecv, nullptr, in.data(), count);
    r1.root = (r + n - 1) % n;
    OpArgs r2 = args(CollKind::kSendRecv, nullptr, in2.data(), 3);
    r2.root = (r + n - 1) % n;
    std::shared_ptr<Op> op;
    ASSERT_EQ(c.post_group({s1, s2, r1, r2}, &op), Status::kSuccess) << last_error();
    ASSERT_EQ(c.wait(*op), Status::kSuccess) << last_error();
    int prev = (r + n - 1) % n;
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], val(prev, i));
    for (size_t i = 0; i < 3; ++i) ASSERT_EQ(in2[i], val(prev, 5000 + i));
    OpArgs b = args(CollKind::kBarrier, nullptr, nullptr, 0);
    b.dtype = ZCX_UINT8;
    b.op = ZCX_MAX;
    for (int k = 0; k < 3; ++k) ASSERT_EQ(run_op(c, b), Status::kSuccess) << last_error();
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, GatherTest, ::testing::ValuesIn(kRankCounts),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace zcx::coll::fake
