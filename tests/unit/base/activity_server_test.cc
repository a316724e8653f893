// ActivityServer: answers what its rank's departure page says to a query with the job secret
// and its rank, refuses any other, is never held up for long by a client that sends nothing,
// and the asking side tells an answer from a refusal and from silence, within its bound.
#include "base/activity_server.h"

#include "common/clock.h"
#include "common/no_free_fds.h"
#include "common/socket.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace zcx {
namespace {

constexpr uint64_t kSecret = 0x5eC12e7ull;
constexpr int kRank = 3;

// A page and its server answering as rank 3.
struct Served {
  Departures page;
  ActivityServer server;
  SockAddr addr;

  void start() {
    page.open_own();
    ASSERT_GE(page.own_fd(), 0) << "no page could be made here";
    ASSERT_EQ(server.listen(&addr), Status::kSuccess) << last_error();
    ASSERT_EQ(server.start(&page, kSecret, kRank), Status::kSuccess) << last_error();
  }
  PeerActivity ask(uint64_t secret = kSecret, int rank = kRank, int timeout_ms = 2000) {
    return ask_activity({rank}, {addr}, secret, 0, timeout_ms).at(0);
  }
};

TEST(ActivityServer, AnswersWhatThePageSays) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.start());
  EXPECT_EQ(s.ask().reply, PeerActivity::Reply::kAnswered);
  EXPECT_EQ(s.ask().activity.comm, 0u) << "nothing called yet";
  s.page.note_call(77, 5);
  s.page.note_done(4);
  s.page.note_poll(now_ns() - 2'000'000'000);
  const PeerActivity got = s.ask();
  ASSERT_EQ(got.reply, PeerActivity::Reply::kAnswered);
  EXPECT_EQ(got.activity.comm, 77u);
  EXPECT_EQ(got.activity.seq, 5u);
  EXPECT_EQ(got.activity.done, 4u);
  EXPECT_FALSE(got.activity.failed);
  const double age_s = static_cast<double>(now_ns() - got.activity.polled_ns) / 1e9;
  EXPECT_GT(age_s, 1.9);  // sent as an age, put back on this clock
  EXPECT_LT(age_s, 3.0);
  s.page.note_failed();
  EXPECT_TRUE(s.ask().activity.failed);
}

TEST(ActivityServer, RefusesAnotherSecretOrRankAndStillAnswersAfter) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.start());
  EXPECT_EQ(s.ask(kSecret ^ 1).reply, PeerActivity::Reply::kRefused);
  EXPECT_EQ(s.ask(kSecret, kRank + 1).reply, PeerActivity::Reply::kRefused);
  EXPECT_EQ(s.ask().reply, PeerActivity::Reply::kAnswered);
}

TEST(ActivityServer, AClientThatSendsNothingHoldsItBriefly) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.start());
  UniqueFd mute;
  ASSERT_EQ(socket_connect_start(s.addr, &mute), Status::kSuccess);
  usleep(20 * 1000);  // accepted first: the query below waits behind it
  const int64_t t0 = now_ns();
  EXPECT_EQ(s.ask(kSecret, kRank, 2000).reply, PeerActivity::Reply::kAnswered);
  EXPECT_LT(now_ns() - t0, 1'000'000'000) << "held up by a mute client for more than 1 s";
}

TEST(ActivityServer, AskingTellsSilenceFromRefusalWithinItsBound) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.start());
  // A listener nobody serves (a stopped process): the connection is made, no answer comes.
  UniqueFd deaf;
  SockAddr deaf_addr;
  SockAddr local;
  ASSERT_EQ(sockaddr_parse("127.0.0.1", &local), Status::kSuccess);
  ASSERT_EQ(socket_listen(local, 4, &deaf, &deaf_addr), Status::kSuccess);
  // A port nobody listens on any more (a finalized rank).
  SockAddr gone;
  {
    UniqueFd closed;
    ASSERT_EQ(socket_listen(local, 4, &closed, &gone), Status::kSuccess);
  }
  const int64_t t0 = now_ns();
  std::vector<PeerActivity> got =
      ask_activity({kRank, 1, 2, 4}, {s.addr, deaf_addr, gone, SockAddr{}}, kSecret, 0, 300);
  const double took_s = static_cast<double>(now_ns() - t0) / 1e9;
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].reply, PeerActivity::Reply::kAnswered);
  EXPECT_EQ(got[1].reply, PeerActivity::Reply::kSilent);
  EXPECT_EQ(got[2].reply, PeerActivity::Reply::kRefused);
  EXPECT_EQ(got[3].reply, PeerActivity::Reply::kRefused) << "no address: it answers none";
  EXPECT_GE(took_s, 0.25);
  EXPECT_LT(took_s, 1.0) << "all asked at once, bounded by the 300 ms given";
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Out of fds, accept fails while the connection stays queued: the thread must wait, not spin
// on a poll that wakes at once, and answer once fds are back.
TEST(ActivityServer, OutOfFdsItWaitsInsteadOfSpinning) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.start());
  UniqueFd queued(socket(s.addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(queued.valid());
  test::NoFreeFds no_fds;
  ASSERT_TRUE(no_fds.active());
  const int rc = connect(queued.get(), s.addr.sa(), s.addr.len);  // its accept must fail
  const int err = errno;
  const double cpu0 = cpu_seconds();
  usleep(300 * 1000);
  const double cpu = cpu_seconds() - cpu0;
  ASSERT_TRUE(no_fds.restore());
  ASSERT_TRUE(rc == 0 || err == EINPROGRESS) << strerror(err);
  EXPECT_LT(cpu, 0.05) << "the thread spun for want of an fd";
  EXPECT_EQ(s.ask().reply, PeerActivity::Reply::kAnswered) << "fds are back";
}

TEST(ActivityServer, StopIsPromptAndIdempotent) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.start());
  const int64_t t0 = now_ns();
  s.server.stop();
  s.server.stop();
  EXPECT_LT(now_ns() - t0, 500'000'000);
  EXPECT_EQ(s.ask(kSecret, kRank, 300).reply, PeerActivity::Reply::kRefused) << "stopped";
  ActivityServer never_started;
  never_started.stop();
  EXPECT_EQ(never_started.start(&s.page, kSecret, kRank), Status::kSuccess)
      << "no listener: nothing to serve";
}

}  // namespace
}  // namespace zcx
