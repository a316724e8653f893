// A rank killed during bootstrap: the survivors fail within ZCX_TIMEOUT + 2 s with an error
// that names the dead rank. Ranks are forked processes (a SIGKILL must not take the test).
#include "common/bootstrap/bootstrap.h"
#include "bootstrap/test_util.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace zcx {
namespace {

constexpr int kTimeoutS = 3;

// A forked rank: runs init (+ an allgather when `gather`), writes its last error into the
// pipe and exits 0 on success, 1 on failure. `die_after_init` SIGKILLs itself after init.
pid_t spawn_rank(const UniqueId& id, int rank, int n, bool gather, bool die_after_init, int pipe_fd) {
  return test::fork_child([=]() {
    config::set_override("ZCX_TIMEOUT", std::to_string(kTimeoutS));
    std::unique_ptr<Bootstrap> bs;
    Status s = Bootstrap::init(id, rank, n, &bs);
    if (ok(s) && die_after_init) raise(SIGKILL);
    int slot[8] = {rank};
    if (ok(s) && gather) s = bs->allgather(slot, sizeof(int));
    std::string msg = ok(s) ? "ok" : last_error();
    if (write(pipe_fd, msg.data(), msg.size()) < 0) return 2;
    return ok(s) ? 0 : 1;
  });
}

struct Rank {
  pid_t pid = -1;
  int pipe[2] = {-1, -1};
};

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Runs n ranks where `victim` dies as `how` says; checks survivors' errors.
void run_kill_case(int n, int victim, bool gather, bool kill_after_init) {
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  std::vector<Rank> ranks(static_cast<size_t>(n));
  int64_t t0 = now_ms();
  for (int r = 0; r < n; ++r) {
    Rank& rk = ranks[static_cast<size_t>(r)];
    ASSERT_EQ(pipe(rk.pipe), 0);
    bool dies = r == victim;
    if (dies && !kill_after_init) continue;  // never started: "killed before it joined"
    rk.pid = spawn_rank(id, r, n, gather, dies && kill_after_init, rk.pipe[1]);
  }
  for (Rank& rk : ranks) close(rk.pipe[1]);
  for (int r = 0; r < n; ++r) {
    Rank& rk = ranks[static_cast<size_t>(r)];
    if (rk.pid < 0) continue;
    int code = test::wait_child(rk.pid, (kTimeoutS + 6) * 1000);
    int64_t took = now_ms() - t0;
    std::string msg = read_all(rk.pipe[0]);
    if (r == victim) {
      EXPECT_EQ(code, 128 + SIGKILL);
      continue;
    }
    EXPECT_EQ(code, 1) << "rank " << r << " should fail: " << msg;
    EXPECT_LE(took, (kTimeoutS + 2) * 1000) << "rank " << r << ": " << msg;
    EXPECT_NE(msg.find("rank " + std::to_string(victim)), std::string::npos)
        << "rank " << r << " error does not name rank " << victim << ": " << msg;
    std::printf("rank %d failed after %lld ms: %s\n", r, static_cast<long long>(took), msg.c_str());
  }
  for (Rank& rk : ranks) close(rk.pipe[0]);
}

TEST(BootstrapFaults, RankNeverStartsSurvivorsNameIt) { run_kill_case(3, 2, false, false); }

TEST(BootstrapFaults, RankKilledBeforeAllgatherSurvivorsNameIt) { run_kill_case(4, 2, true, true); }

TEST(BootstrapFaults, RootKilledSurvivorsNameRoot) { run_kill_case(3, 0, true, true); }

// Rank 2 joins and is SIGKILLed while it waits for the table (rank 3 never comes): the root
// sees its connection close and fails the job at once, naming rank 2, instead of timing out.
TEST(BootstrapFaults, RankKilledWhileWaitingForOthers) {
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  int pipes[3][2];
  pid_t pids[3];
  int64_t t0 = now_ms();
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(pipe(pipes[r]), 0);
    pids[r] = spawn_rank(id, r, 4, false, false, pipes[r][1]);
    close(pipes[r][1]);
  }
  usleep(500000);  // all three have joined by now
  ASSERT_GT(pids[2], 0) << "fork failed";
  kill(pids[2], SIGKILL);
  for (int r = 0; r < 3; ++r) {
    int code = test::wait_child(pids[r], (kTimeoutS + 6) * 1000);
    std::string msg = read_all(pipes[r][0]);
    close(pipes[r][0]);
    if (r == 2) {
      EXPECT_EQ(code, 128 + SIGKILL);
      continue;
    }
    int64_t took = now_ms() - t0;
    EXPECT_EQ(code, 1) << msg;
    EXPECT_LT(took, kTimeoutS * 1000) << "should fail on the close, not on the timeout: " << msg;
    EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
    std::printf("rank %d failed after %lld ms: %s\n", r, static_cast<long long>(took), msg.c_str());
  }
}

// A rank that enters allgather after the root already failed the job and exited still
// learns which rank failed (the root's report is read even though sending to it fails).
TEST(BootstrapFaults, LateRankLearnsWhoFailed) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "5");
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  std::unique_ptr<Bootstrap> bs[3];
  test::run_threads(3, [&](int r) { ASSERT_EQ(Bootstrap::init(id, r, 3, &bs[r]), Status::kSuccess); });
  bs[2].reset();  // rank 2 dies
  int slot[3] = {};
  EXPECT_EQ(bs[0]->allgather(slot, sizeof(int)), Status::kRemote);  // the root notices...
  bs[0].reset();                                                     // ...reports, and exits
  usleep(100000);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the first send may still succeed
    Status s = bs[1]->allgather(slot, sizeof(int));
    EXPECT_TRUE(failed(s));
    if (attempt == 0) {
      EXPECT_NE(std::string(last_error()).find("rank 2"), std::string::npos) << last_error();
    }
  }
}

// Ranks that call allgather with different sizes all fail with an error that says so.
TEST(BootstrapFaults, MismatchedAllgatherFailsEveryRank) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "5");
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  std::unique_ptr<Bootstrap> bs[3];
  test::run_threads(3, [&](int r) { ASSERT_EQ(Bootstrap::init(id, r, 3, &bs[r]), Status::kSuccess); });
  Status st[3];
  std::string msg[3];
  test::run_threads(3, [&](int r) {
    uint64_t buf[3 * 2] = {};
    st[r] = bs[r]->allgather(buf, r == 1 ? 16 : 8);
    msg[r] = last_error();
    EXPECT_EQ(bs[r]->barrier(), Status::kAborted);  // the job cannot continue
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(failed(st[r])) << "rank " << r;
    EXPECT_NE(msg[r].find("rank 1"), std::string::npos) << msg[r];
    EXPECT_NE(msg[r].find("differently"), std::string::npos) << msg[r];
  }
}

}  // namespace
}  // namespace zcx
