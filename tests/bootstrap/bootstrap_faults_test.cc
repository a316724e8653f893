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

}  // namespace
}  // namespace zcx
