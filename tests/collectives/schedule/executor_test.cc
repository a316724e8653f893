// The executor driven by hand over the in-memory transport: what it publishes about this
// rank while an operation runs.
#include "schedule/executor.h"

#include "base/departures.h"
#include "fake_transport.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace zcx::coll {
namespace {

class Links final : public PeerLinks {
 public:
  explicit Links(Context& ctx) : ctx_(ctx) {}
  Status endpoint(int peer, Endpoint** ep) override { return ctx_.endpoint(peer, ep); }
  Context& context() override { return ctx_; }
  std::string peer_name(int peer) const override { return "rank " + std::to_string(peer); }

 private:
  Context& ctx_;
};

// A rank whose every call moves data (its peer's receives are all posted first) still
// notes on its page, at least once per 32 calls, that it polls: a stalled member reads the
// page, and must not call a rank silent that is busy moving data (core/comm_members.cc).
TEST(ExecutorPoll, ARankMovingDataOnEveryCallNotesThatItPolls) {
  constexpr int kSends = 1000;  // a chain: each send waits for the last, 4 per call at most
  fake::World world(2);
  Departures page;
  page.open_own();
  ASSERT_GE(page.own_fd(), 0) << "no departure page (memfd) on this machine";
  std::unique_ptr<Context> ctx = fake::make_context(world, 0, &page);
  Links links(*ctx);
  std::vector<uint8_t> sent(kSends), got(kSends, 0);
  std::iota(sent.begin(), sent.end(), uint8_t{1});
  OpDesc desc, theirs;
  desc.nranks = 2;
  desc.seq = 1;
  desc.count = kSends;
  (void)world.post_recv(1, 0, &theirs, sizeof theirs);  // the descriptor goes first
  Schedule sched(ZCX_UINT8, ZCX_SUM);
  int last = kNoTask;
  for (int i = 0; i < kSends; ++i) {
    (void)world.post_recv(1, 0, &got[i], 1);
    last = sched.send(1, &sent[i], 1, {last});
  }
  Executor ex(&sched, &links, desc, 2, 10000);
  bool done = false;
  int calls = 0;
  for (; !done && calls < 64; ++calls) ASSERT_EQ(ex.progress(&done), Status::kSuccess);
  ASSERT_FALSE(done) << "finished in " << calls << " calls: too short to tell";
  Departures::Activity a;
  ASSERT_TRUE(page.own_activity(&a));
  EXPECT_NE(a.polled_ns, 0) << "64 calls that each moved data noted no poll";
  for (; !done && calls < 10 * kSends; ++calls) ASSERT_EQ(ex.progress(&done), Status::kSuccess);
  ASSERT_TRUE(done) << "not finished after " << calls << " calls";
  EXPECT_EQ(got, sent);
}

}  // namespace
}  // namespace zcx::coll
