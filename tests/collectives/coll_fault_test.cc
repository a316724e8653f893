// Failure behaviour and communicator features over the in-memory transport: disagreeing
// ranks get kMismatch (never a hang or a wrong result), a dead peer gives an error naming
// it, a silent one a bounded kTimeout naming it; errors are sticky; connections are lazy;
// request-based operations complete in order; split builds working sub-communicators.
#include "coll_test_util.h"

#include "common/config.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/clock.h"

namespace zcx::coll::fake {
namespace {

OpArgs allreduce(void* buf, size_t count, zcx_dtype_t dt = ZCX_INT32) {
  OpArgs a;
  a.kind = CollKind::kAllreduce;
  a.sendbuf = a.recvbuf = buf;
  a.count = count;
  a.dtype = dt;
  return a;
}

// Holds a rank until `count` ranks arrived (bounded), so that no rank leaves — and thereby
// fails its links — while others still report the failure under test.
void linger(std::atomic<int>& arrived, int count) {
  arrived.fetch_add(1);
  for (int i = 0; i < 20000 && arrived.load() < count; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

struct Outcome {
  std::mutex mu;
  std::vector<Status> status;
  std::vector<std::string> message;
  explicit Outcome(int n) : status(n, Status::kSuccess), message(n) {}
  void set(int r, Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status[r] = s;
    message[r] = s == Status::kSuccess ? "" : last_error();
  }
};

// kept_buffers: a test whose operations fail keeps each rank's buffers outside the rank's
// function. run_ranks closes a rank's links only after that function returns, and until then
// a peer still running its part can match a send the failed rank abandoned and copy from its
// buffer (ThreadSanitizer saw such a copy read a buffer already freed). A process's buffers
// die with its links; here they die after every rank has left.

// Rank `odd` calls something different from everyone else: it fails, at least one rank
// reports kMismatch naming a peer, and every rank returns within ZCX_TIMEOUT. (A rank whose
// whole operation only involved agreeing peers may complete with the result they define.)
void expect_mismatch(int n, int odd, const std::function<OpArgs(int, std::vector<int32_t>&)>& make,
                     const char* algo) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "2");
  config::ScopedOverride force("ZCX_ALGO", algo);
  Outcome out(n);
  std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(64));
  run_ranks(n, [&](int r, Comm& c) {
    std::vector<int32_t>& buf = bufs[r];  // outlives the rank: see kept_buffers
    buf.assign(64, r);
    out.set(r, run_op(c, make(r, buf)));
  });
  int mismatches = 0;
  EXPECT_NE(out.status[odd], Status::kSuccess);
  for (int r = 0; r < n; ++r) mismatches += out.status[r] == Status::kMismatch;
  EXPECT_GE(mismatches, 1);
  for (int r = 0; r < n; ++r)
    if (out.status[r] == Status::kMismatch) {
      EXPECT_NE(out.message[r].find("rank "), std::string::npos) << out.message[r];
    }
}

TEST(Mismatch, CountDtypeOpRootAndKindAreDetected) {
  for (const char* algo : {"ring", "tree", "rhd"}) {
    SCOPED_TRACE(algo);
    expect_mismatch(4, 2, [](int r, std::vector<int32_t>& b) { return allreduce(b.data(), r == 2 ? 17 : 16); }, algo);
    expect_mismatch(4, 1, [](int r, std::vector<int32_t>& b) {
      return allreduce(b.data(), 16, r == 1 ? ZCX_UINT32 : ZCX_INT32); }, algo);
    expect_mismatch(4, 3, [](int r, std::vector<int32_t>& b) {
      OpArgs a = allreduce(b.data(), 16);
      a.op = r == 3 ? ZCX_MAX : ZCX_SUM;
      return a; }, algo);
  }
  expect_mismatch(3, 0, [](int r, std::vector<int32_t>& b) {  // broadcast vs allreduce
    OpArgs a = allreduce(b.data(), 16);
    if (r == 0) a.kind = CollKind::kBroadcast, a.root = 0;
    return a; }, "allreduce:ring,broadcast:chain");
  expect_mismatch(4, 1, [](int r, std::vector<int32_t>& b) {  // different roots
    OpArgs a = allreduce(b.data(), 16);
    a.kind = CollKind::kBroadcast;
    a.root = r == 1 ? 1 : 0;
    return a; }, "binomial");
}

TEST(Mismatch, PointToPointAndAlltoallvCounts) {
  Outcome out(2);
  std::vector<std::vector<int32_t>> bufs(2);
  run_ranks(2, [&](int r, Comm& c) {
    std::vector<int32_t>& buf = bufs[r];  // outlives the rank: see kept_buffers
    buf.assign(10, r);
    OpArgs a;
    a.kind = CollKind::kSendRecv;
    a.dtype = ZCX_INT32;
    a.root = 1 - r;
    a.count = r == 0 ? 10 : 8;  // the receiver expects fewer elements than are sent
    if (r == 0) a.sendbuf = buf.data();
    else a.recvbuf = buf.data();
    out.set(r, run_op(c, a));
  });
  EXPECT_EQ(out.status[1], Status::kMismatch) << out.message[1];
  EXPECT_NE(out.message[1].find("count 32 here vs 40 there"), std::string::npos) << out.message[1];
}

TEST(Failure, DeadPeerIsNamedAndErrorsAreSticky) {
  World world(4);
  Outcome out(4), again(4);
  std::atomic<int> arrived{0};
  run_ranks(world, [&](int r, Comm& c) {
    std::vector<int32_t> buf(4096, r);
    if (r == 2) {  // rank 2 dies before the collective
      world.kill(2);
      return;
    }
    out.set(r, run_op(c, allreduce(buf.data(), buf.size())));
    again.set(r, run_op(c, allreduce(buf.data(), buf.size())));
    linger(arrived, 3);
  });
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(out.status[r], Status::kRemote) << "rank " << r << ": " << out.message[r];
    EXPECT_EQ(again.status[r], out.status[r]) << "the first failure is sticky";
  }
  // The ring neighbours of rank 2 name it.
  for (int r : {1, 3}) {
    EXPECT_NE(out.message[r].find("rank 2"), std::string::npos) << "rank " << r << ": " << out.message[r];
  }
}

TEST(Failure, SilentPeerTimesOutNamingIt) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "1");
  config::ScopedOverride force("ZCX_ALGO", "ring");
  Outcome out(3);
  std::atomic<int> arrived{0};
  int64_t start = now_ms();
  run_ranks(3, [&](int r, Comm& c) {
    std::vector<int32_t> buf(100, r);
    if (r != 1) out.set(r, run_op(c, allreduce(buf.data(), buf.size())));
    linger(arrived, 3);  // rank 1 stays alive but never calls the collective
  });
  EXPECT_LT(now_ms() - start, 10000);
  for (int r : {0, 2}) {
    EXPECT_EQ(out.status[r], Status::kTimeout) << out.message[r];
    EXPECT_NE(out.message[r].find("rank 1 of 'world'"), std::string::npos) << out.message[r];
  }
}

TEST(Comm, ConnectionsAreLazy) {
  config::ScopedOverride force("ZCX_ALGO", "ring");
  std::vector<size_t> conns(8);
  run_ranks(8, [&](int r, Comm& c) {
    EXPECT_EQ(c.connections(), 0u);
    std::vector<int32_t> buf(1000, r);
    ASSERT_EQ(run_op(c, allreduce(buf.data(), buf.size())), Status::kSuccess) << last_error();
    conns[r] = c.connections();
  });
  for (int r = 0; r < 8; ++r) EXPECT_EQ(conns[r], 2u) << "ring: only prev and next";
}

TEST(Comm, RequestsCompleteInIssueOrder) {
  const int n = 5;
  run_ranks(n, [&](int r, Comm& c) {
    std::vector<std::vector<int32_t>> bufs(6, std::vector<int32_t>(777));
    std::vector<std::shared_ptr<Op>> ops;
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (size_t i = 0; i < 777; ++i) bufs[k][i] = val(r, i + k);
      std::shared_ptr<Op> op;
      ASSERT_EQ(c.post(allreduce(bufs[k].data(), 777), &op), Status::kSuccess);
      ops.push_back(op);
    }
    for (size_t k = ops.size(); k-- > 0;) ASSERT_EQ(c.wait(*ops[k]), Status::kSuccess) << last_error();
    for (size_t k = 0; k < bufs.size(); ++k)
      for (size_t i = 0; i < 777; ++i) ASSERT_EQ(bufs[k][i], sum_over_ranks(n, i + k));
  });
}

TEST(Comm, SplitByColorOrderedByKey) {
  const int n = 8;
  run_ranks(n, [&](int r, Comm& c) {
    std::unique_ptr<Comm> sub;
    int color = r % 3 == 2 ? -1 : r % 2;  // ranks 2 and 5 opt out
    ASSERT_EQ(c.split(color, -r, &sub), Status::kSuccess) << last_error();
    int32_t y = 1;  // the parent still works after the split
    if (color < 0) {
      EXPECT_EQ(sub, nullptr);
      ASSERT_EQ(run_op(c, allreduce(&y, 1)), Status::kSuccess) << last_error();
      return;
    }
    ASSERT_NE(sub, nullptr);
    std::vector<int> members;
    for (int q = n - 1; q >= 0; --q)  // key -q: descending old rank
      if (q % 3 != 2 && q % 2 == color) members.push_back(q);
    EXPECT_EQ(sub->nranks(), static_cast<int>(members.size()));
    EXPECT_EQ(members[sub->rank()], r);
    int32_t x = r, want = 0;
    for (int q : members) want += q;
    ASSERT_EQ(run_op(*sub, allreduce(&x, 1)), Status::kSuccess) << last_error();
    EXPECT_EQ(x, want);
    ASSERT_EQ(run_op(c, allreduce(&y, 1)), Status::kSuccess) << last_error();
    EXPECT_EQ(y, n);
  });
}

}  // namespace
}  // namespace zcx::coll::fake
