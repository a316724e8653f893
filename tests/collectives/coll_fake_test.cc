// Every collective x algorithm over the in-memory transport: N in {1,2,3,4,5,8}, counts
// {0, 1, N-1, N+1, 1000003}, in place and out of place, every root; data checked element by
// element against values computed here.
#include "coll_test_util.h"

#include "common/config.h"

#include <numeric>
#include <ostream>

namespace zcx::coll::fake {
namespace {

struct AlgoCase {
  const char* algo;
  int n;
};

// What gtest prints for a case (and ctest's test names carry), rather than its bytes.
void PrintTo(const AlgoCase& c, std::ostream* os) { *os << c.algo << ", n=" << c.n; }

std::string case_name(const ::testing::TestParamInfo<AlgoCase>& info) {
  return std::string(info.param.algo) + "_n" + std::to_string(info.param.n);
}

std::vector<AlgoCase> cases(std::initializer_list<const char*> algos) {
  std::vector<AlgoCase> v;
  for (const char* a : algos)
    for (int n : kRankCounts) v.push_back({a, n});
  return v;
}

// Small counts also run with a tiny chunk so that the pipelines cut blocks into pieces.
std::vector<std::string> chunks_for(size_t count) {
  if (count > 100000) return {"0"};
  return {"0", "4", "12"};
}

class AllreduceTest : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(AllreduceTest, SumsEveryElement) {
  const auto [algo, n] = GetParam();
  config::ScopedOverride force("ZCX_ALGO", std::string("allreduce:") + algo);
  for (size_t count : test_counts(n)) {
    std::vector<int32_t> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = sum_over_ranks(n, i);
    const std::vector<std::vector<int32_t>> values = every_rank_values(n, count);
    RankBuffers bufs(n, count, count);
    for (const std::string& chunk : chunks_for(count))
      for (bool inplace : {false, true}) {
        SCOPED_TRACE("count " + std::to_string(count) + " chunk " + chunk + (inplace ? " in place" : ""));
        config::ScopedOverride ch("ZCX_CHUNK_SIZE", chunk);
        run_ranks(n, [&](int r, Comm& c) {
          int32_t* in = bufs.in(r, values[r]);
          int32_t* out = bufs.out(r);
          OpArgs a;
          a.kind = CollKind::kAllreduce;
          a.sendbuf = in;
          a.recvbuf = inplace ? in : out;
          a.count = count;
          a.dtype = ZCX_INT32;
          ASSERT_EQ(run_op(c, a, algo), Status::kSuccess) << last_error();
          EXPECT_TRUE(same_ints(want, static_cast<int32_t*>(a.recvbuf), count)) << "rank " << r;
        });
        if (HasFailure()) return;
      }
  }
}

TEST_P(AllreduceTest, EveryOpAndFloatResultsAgreeAcrossRanks) {
  const auto [algo, n] = GetParam();
  config::ScopedOverride force("ZCX_ALGO", std::string("allreduce:") + algo);
  const size_t count = 1000;
  for (zcx_redop_t op : {ZCX_PROD, ZCX_MIN, ZCX_MAX, ZCX_AVG}) {
    std::vector<int32_t> want(count);
    for (size_t i = 0; i < count; ++i) {
      uint32_t acc = static_cast<uint32_t>(val(0, i));
      for (int r = 1; r < n; ++r) {
        int32_t x = val(r, i), y = static_cast<int32_t>(acc);
        if (op == ZCX_PROD) acc *= static_cast<uint32_t>(x);
        if (op == ZCX_MIN) acc = static_cast<uint32_t>(x < y ? x : y);
        if (op == ZCX_MAX) acc = static_cast<uint32_t>(x > y ? x : y);
        if (op == ZCX_AVG) acc += static_cast<uint32_t>(x);
      }
      want[i] = static_cast<int32_t>(acc);
      if (op == ZCX_AVG) want[i] = static_cast<int32_t>(acc) / n;
    }
    run_ranks(n, [&](int r, Comm& c) {
      std::vector<int32_t> in(count);
      for (size_t i = 0; i < count; ++i) in[i] = val(r, i);
      OpArgs a;
      a.kind = CollKind::kAllreduce;
      a.sendbuf = a.recvbuf = in.data();
      a.count = count;
      a.dtype = ZCX_INT32;
      a.op = op;
      ASSERT_EQ(run_op(c, a, algo), Status::kSuccess) << last_error();
      EXPECT_TRUE(same_ints(want, in.data(), count)) << zcx_redop_name(op) << " rank " << r;
    });
  }
  // float32: order of additions depends on the algorithm, but every rank gets the same bits.
  std::vector<std::vector<float>> results(n);
  run_ranks(n, [&](int r, Comm& c) {
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = 0.1f * static_cast<float>(val(r, i) % 1000);
    OpArgs a;
    a.kind = CollKind::kAllreduce;
    a.sendbuf = a.recvbuf = in.data();
    a.count = count;
    a.dtype = ZCX_FLOAT32;
    ASSERT_EQ(run_op(c, a, algo), Status::kSuccess) << last_error();
    results[r] = in;
  });
  for (int r = 1; r < n; ++r) EXPECT_EQ(results[r], results[0]) << "rank " << r;
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += 0.1 * static_cast<float>(val(r, i) % 1000);
    ASSERT_NEAR(results[0][i], want, 1e-3 * (1 + std::abs(want))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Algos, AllreduceTest, ::testing::ValuesIn(cases({"ring", "tree", "rhd", "direct"})),
                         case_name);

class RootedTest : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(RootedTest, BroadcastFromEveryRoot) {
  const auto [algo, n] = GetParam();
  config::ScopedOverride force("ZCX_ALGO", std::string("broadcast:") + algo);
  for (size_t count : test_counts(n)) {
    const std::vector<std::vector<int32_t>> values = every_rank_values(n, count);
    const std::vector<int32_t> others(count, -7);  // what a non-root sends (nothing should)
    RankBuffers bufs(n, count, count);
    for (const std::string& chunk : chunks_for(count))
      for (int root = 0; root < n; ++root)
        for (bool inplace : {false, true}) {
          SCOPED_TRACE("count " + std::to_string(count) + " chunk " + chunk + " root " +
                       std::to_string(root) + (inplace ? " in place" : ""));
          config::ScopedOverride ch("ZCX_CHUNK_SIZE", chunk);
          const std::vector<int32_t>& want = values[root];
          run_ranks(n, [&](int r, Comm& c) {
            int32_t* in = bufs.in(r, r == root ? values[r] : others);
            int32_t* out = bufs.out(r);
            OpArgs a;
            a.kind = CollKind::kBroadcast;
            a.sendbuf = in;
            a.recvbuf = inplace ? in : out;
            a.count = count;
            a.dtype = ZCX_INT32;
            a.root = root;
            ASSERT_EQ(run_op(c, a, algo), Status::kSuccess) << last_error();
            EXPECT_TRUE(same_ints(want, static_cast<int32_t*>(a.recvbuf), count)) << "rank " << r;
          });
          if (HasFailure()) return;
        }
  }
}

TEST_P(RootedTest, ReduceToEveryRoot) {
  const auto [algo, n] = GetParam();
  config::ScopedOverride force("ZCX_ALGO", std::string("reduce:") + algo);
  for (size_t count : test_counts(n)) {
    std::vector<int32_t> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = sum_over_ranks(n, i);
    const std::vector<std::vector<int32_t>> values = every_rank_values(n, count);
    RankBuffers bufs(n, count, count);
    for (const std::string& chunk : chunks_for(count))
      for (int root = 0; root < n; ++root)
        for (bool inplace : {false, true}) {
          SCOPED_TRACE("count " + std::to_string(count) + " chunk " + chunk + " root " +
                       std::to_string(root) + (inplace ? " in place" : ""));
          config::ScopedOverride ch("ZCX_CHUNK_SIZE", chunk);
          run_ranks(n, [&](int r, Comm& c) {
            int32_t* in = bufs.in(r, values[r]);
            int32_t* out = bufs.out(r);
            OpArgs a;
            a.kind = CollKind::kReduce;
            a.sendbuf = in;
            a.recvbuf = inplace ? in : (r == root ? out : nullptr);
            a.count = count;
            a.dtype = ZCX_INT32;
            a.root = root;
            ASSERT_EQ(run_op(c, a, algo), Status::kSuccess) << last_error();
            if (r == root) {
              EXPECT_TRUE(same_ints(want, static_cast<int32_t*>(a.recvbuf), count));
            }
          });
          if (HasFailure()) return;
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Algos, RootedTest, ::testing::ValuesIn(cases({"chain", "binomial"})),
                         case_name);

// A point-to-point call of `count` int32 to or from `peer` (a send when `out` is set).
OpArgs p2p(int peer, const int32_t* out, int32_t* in, size_t count) {
  OpArgs a = int32_args(CollKind::kSendRecv, out, in, count);
  a.root = peer;
  return a;
}

Status run_group(Comm& c, const std::vector<OpArgs>& calls) {
  std::shared_ptr<Op> op;
  ZCX_TRY(c.post_group(calls, &op));
  return c.wait(*op);
}

// Sends to self pair with receives from self in call order, within a group, alongside
// sends to peers (as NCCL and MPI allow); unpaired or unequal ones are refused before
// anything moves, and the communicator stays usable.
TEST(SendRecv, ToSelfInAGroupIsACopy) {
  for (int n : {1, 3}) {
    run_ranks(n, [&](int r, Comm& c) {
      const size_t count = 1000;
      std::vector<int32_t> mine(count), other(count), self1(count), self2(count), from_prev(count);
      for (size_t i = 0; i < count; ++i) mine[i] = val(r, i), other[i] = val(r + 10, i);
      std::vector<OpArgs> calls = {p2p(r, mine.data(), nullptr, count),
                                   p2p(r, other.data(), nullptr, count),
                                   p2p(r, nullptr, self1.data(), count),
                                   p2p(r, nullptr, self2.data(), count)};
      if (n > 1) {
        calls.push_back(p2p((r + 1) % n, mine.data(), nullptr, count));
        calls.push_back(p2p((r + n - 1) % n, nullptr, from_prev.data(), count));
      }
      ASSERT_EQ(run_group(c, calls), Status::kSuccess) << last_error();
      EXPECT_EQ(self1, mine);
      EXPECT_EQ(self2, other);
      if (n > 1) {
        EXPECT_EQ(from_prev[count - 1], val((r + n - 1) % n, count - 1));
      }
      EXPECT_EQ(run_group(c, {p2p(r, mine.data(), nullptr, count)}), Status::kInvalidUsage);
      EXPECT_NE(std::string(last_error()).find("1 sends to self and 0 receives from self"),
                std::string::npos) << last_error();
      EXPECT_EQ(run_group(c, {p2p(r, mine.data(), nullptr, count), p2p(r, nullptr, self1.data(), 10)}),
                Status::kMismatch);
      EXPECT_EQ(run_group(c, {p2p(r, mine.data(), nullptr, 5), p2p(r, nullptr, self1.data(), 5)}),
                Status::kSuccess) << last_error();
    });
  }
}

}  // namespace
}  // namespace zcx::coll::fake

namespace zcx::coll::fake {
namespace {

// Ranks spread over fake hosts (uneven, interleaved, one rank alone on a host).
TEST(Hierarchical, AllreduceAcrossHosts) {
  config::ScopedOverride force("ZCX_ALGO", "allreduce:hier");
  const std::vector<std::vector<std::string>> layouts = {
      {"a", "a", "a", "b", "b", "c", "c", "c"},
      {"a", "b", "a", "b", "a"},
      {"a", "a", "b"},
      {"x", "y", "y", "y"}};
  for (const auto& hosts : layouts) {
    const int n = static_cast<int>(hosts.size());
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100003}})
      for (const char* chunk : {"0", "8"})
        for (bool inplace : {false, true}) {
          SCOPED_TRACE("n " + std::to_string(n) + " count " + std::to_string(count) + " chunk " +
                       chunk + (inplace ? " in place" : ""));
          config::ScopedOverride ch("ZCX_CHUNK_SIZE", chunk);
          std::vector<int32_t> want(count);
          for (size_t i = 0; i < count; ++i) want[i] = sum_over_ranks(n, i);
          World world(n, hosts);
          run_ranks(world, [&](int r, Comm& c) {
            std::vector<int32_t> in(count), out(count, -1);
            for (size_t i = 0; i < count; ++i) in[i] = val(r, i);
            OpArgs a;
            a.kind = CollKind::kAllreduce;
            a.sendbuf = in.data();
            a.recvbuf = inplace ? in.data() : out.data();
            a.count = count;
            a.dtype = ZCX_INT32;
            ASSERT_EQ(run_op(c, a, "hier"), Status::kSuccess) << last_error();
            EXPECT_TRUE(same_ints(want, static_cast<int32_t*>(a.recvbuf), count)) << "rank " << r;
          });
          if (HasFailure()) return;
        }
  }
}

TEST(Hierarchical, DeclinedOnOneHost) {
  config::ScopedOverride force("ZCX_ALGO", "allreduce:hier");
  run_ranks(4, [&](int r, Comm& c) {
    int32_t x = r;
    OpArgs a;
    a.kind = CollKind::kAllreduce;
    a.sendbuf = a.recvbuf = &x;
    a.count = 1;
    a.dtype = ZCX_INT32;
    ASSERT_EQ(run_op(c, a, "ring"), Status::kSuccess) << last_error();  // the default
    EXPECT_EQ(x, 6);
  });
}

TEST(Hierarchical, ModelPicksItForLargeVectorsAcrossHosts) {
  SelectInput in;
  in.kind = CollKind::kAllreduce;
  in.bytes = 256u << 20;
  in.nranks = 16;
  in.nnodes = 2;
  in.ppn = 8;
  in.link = LinkClass::kNet;
  // A fast host and a slow network: crossing the network once per host pays. (With a fast
  // network the unpipelined in-host reduce costs more than it saves, and ring wins.)
  config::ScopedOverride shm("ZCX_COLL_BW_GBS_SHM", "100");
  config::ScopedOverride net("ZCX_COLL_BW_GBS_NET", "1");
  Choice c = select(in);
  EXPECT_EQ(c.algo, Algo::kHier) << c.why;
  in.nnodes = 1;
  in.link = LinkClass::kShm;
  EXPECT_NE(select(in).algo, Algo::kHier);
}

}  // namespace
}  // namespace zcx::coll::fake
