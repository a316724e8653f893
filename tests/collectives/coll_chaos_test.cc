// Random collectives and a member that dies or stops at a random point, 4 processes: over shm
// with the shared lane; over tcp without it; over tcp with ranks 2 and 3 on another host name,
// where the survivors of the other host learn of a stopped member by asking it over TCP.
// Every rank runs the same pseudo-random sequence of posted collectives (kind, 4 B to 4 MiB,
// root; finished with zcx_coll_wait or by polling zcx_coll_test) from a seed, which also picks
// the victim, the step it faults in and how often it polls that step first; with an odd seed
// that step is a large one, so the fault lands inside it rather than between steps. The fault
// is SIGKILL, or SIGSTOP for longer than any survivor waits. Every survivor must fail within
// ZCX_TIMEOUT + 2 s of the fault with a message that names the victim's rank and host; the
// error is sticky; destroy is bounded; no zcx segment is left in /dev/shm. coll_kill_test and
// coll_silent_test fault one chosen allreduce; this walks the other collectives, the shared
// lane and the moments in between. The seeds are fixed, so a failure reruns as it ran.
#include "process_ranks.h"

#include "common/config.h"
#include "common/fork_shared.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace zcx {
namespace {

constexpr int kRanks = 4;
constexpr double kTimeoutS = 3.0;
constexpr double kStopS = kTimeoutS + 6.0;  // longer than any survivor waits (if not woken)
constexpr size_t kMaxCount = size_t{1} << 20;  // float32 elements: 4 MiB
constexpr int kMaxSteps = 400;
constexpr uint64_t kSeeds[] = {11, 12, 13, 14};
constexpr const char* kHostB = "zcx-chaos-host-b";  // ranks 2 and 3 with two hosts

enum class Fault { kKill, kStop };

struct Layout {
  const char* name;
  const char* provider;
  bool two_hosts;  // ranks 2 and 3 under another host name (process_ranks.h, become_host)
};

// What gtest prints for the parameters (and ctest's test names carry).
void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name; }
void PrintTo(Fault fault, std::ostream* os) {
  *os << (fault == Fault::kKill ? "SIGKILL" : "SIGSTOP");
}

// xorshift64: one sequence on every rank from the seed.
struct Rng {
  uint64_t s;
  size_t below(size_t n) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<size_t>(s % n);
  }
};

struct Plan {
  int victim, step, polls;
  bool large;  // the fault step moves at least kMaxCount / 2 elements
};

Plan plan_of(uint64_t seed) {
  Rng r{seed * 0x9e3779b97f4a7c15ull};
  Plan p{};
  p.victim = static_cast<int>(r.below(kRanks));
  p.step = 3 + static_cast<int>(r.below(40));
  p.polls = static_cast<int>(r.below(200));
  p.large = seed % 2 == 1;
  return p;
}

struct Buffers {
  std::vector<float> send = std::vector<float>(kMaxCount * kRanks, 1.0f);
  std::vector<float> recv = std::vector<float>(kMaxCount * kRanks);
};

// Posts the next step of the sequence (a large one when `large`: every rank passes the same);
// *wait says whether to finish it with zcx_coll_wait.
zcx_status_t post_step(Rng& rng, zcx_comm_t c, Buffers& b, bool large, zcx_coll_request_t* req,
                       bool* wait) {
  const size_t kind = rng.below(large ? 6 : 7);  // a barrier moves nothing
  const size_t count = large                 ? kMaxCount / 2 + rng.below(kMaxCount / 2)
                       : rng.below(4) == 0 ? 1 + rng.below(kMaxCount)
                                           : 1 + rng.below(1024);
  const size_t block = count / kRanks + 1;
  const int root = static_cast<int>(rng.below(kRanks));
  *wait = rng.below(2) == 0;
  const float* s = b.send.data();
  float* r = b.recv.data();
  switch (kind) {
    case 0: return zcx_iallreduce(s, r, count, ZCX_FLOAT32, ZCX_SUM, c, nullptr, req);
    case 1: return zcx_iallgather(s, r, block, ZCX_FLOAT32, c, nullptr, req);
    case 2: return zcx_ibroadcast(s, r, count, ZCX_FLOAT32, root, c, nullptr, req);
    case 3: return zcx_ireduce(s, r, count, ZCX_FLOAT32, ZCX_MAX, root, c, nullptr, req);
    case 4: return zcx_ireducescatter(s, r, block, ZCX_FLOAT32, ZCX_SUM, c, nullptr, req);
    case 5: return zcx_ialltoall(s, r, block, ZCX_FLOAT32, c, nullptr, req);
    default: return zcx_ibarrier_comm(c, nullptr, req);
  }
}

zcx_status_t finish(zcx_coll_request_t req, bool wait) {
  if (wait) return zcx_coll_wait(req);
  for (int done = 0;;) {
    const zcx_status_t st = zcx_coll_test(req, &done);
    if (st != ZCX_SUCCESS || done) return st;
  }
}

// Survivors count themselves into `failed` (shared across the fork) once their step failed.
bool every_survivor_failed(const std::atomic<int>& failed) { return failed.load() >= kRanks - 1; }

// The victim: runs the sequence up to its step, posts that step, polls it, then faults.
// Reports "KILLED <monotonic_s> step <k>" just before the fault (process_ranks.h). Stopped,
// it is woken once every survivor has failed (`failed`): what the survivors do after that
// (the sticky check, destroy) does not need it silent.
int victim(zcx_comm_t comm, Rng& rng, const Plan& p, Fault fault, std::atomic<int>* failed,
           int fd) {
  Buffers b;
  zcx_coll_request_t req = nullptr;
  bool wait = false;
  for (int k = 0; k < p.step; ++k)
    if (post_step(rng, comm, b, false, &req, &wait) != ZCX_SUCCESS ||
        finish(req, wait) != ZCX_SUCCESS)
      return dprintf(fd, "VICTIM step %d failed: %s\n", k, zcx_get_last_error()), 3;
  if (post_step(rng, comm, b, p.large, &req, &wait) != ZCX_SUCCESS)
    return dprintf(fd, "VICTIM post failed: %s\n", zcx_get_last_error()), 3;
  int done = 0;
  for (int i = 0; i < p.polls && !done; ++i)
    if (zcx_coll_test(req, &done) != ZCX_SUCCESS)
      return dprintf(fd, "VICTIM poll failed: %s\n", zcx_get_last_error()), 3;
  dprintf(fd, "KILLED %.6f step %d %s\n", test::monotonic_s(), p.step, done ? "done" : "posted");
  if (fault == Fault::kKill) raise(SIGKILL);
  test::stop_self_for(kStopS, fd, [failed] { return every_survivor_failed(*failed); });
  dprintf(fd, "AWAY\n");
  (void)zcx_comm_abort(comm);
  return 0;
}

// A survivor: runs the sequence until a step fails; "RESULT <status> <monotonic_s>" and the
// message (process_ranks.h), then "STEP <k>", "STICKY ..." and "DESTROY ...". It
// keeps its communicator until every survivor has failed (or the bound passed), so that no
// survivor's teardown is what another one reports.
int survivor(zcx_comm_t comm, Rng& rng, const Plan& p, std::atomic<int>* failed, int fd) {
  Buffers b;
  zcx_status_t st = ZCX_SUCCESS;
  int k = 0;
  for (; k < kMaxSteps && st == ZCX_SUCCESS; ++k) {
    zcx_coll_request_t req = nullptr;
    bool wait = false;
    st = post_step(rng, comm, b, p.large && k == p.step, &req, &wait);
    if (st == ZCX_SUCCESS) st = finish(req, wait);
  }
  dprintf(fd, "RESULT %d %.6f\n%s\nSTEP %d\n", static_cast<int>(st), test::monotonic_s(),
          st == ZCX_SUCCESS ? "" : zcx_get_last_error(), k - 1);
  failed->fetch_add(1);
  for (const double until = test::monotonic_s() + kTimeoutS + 3.0;
       !every_survivor_failed(*failed) && test::monotonic_s() < until;)
    usleep(10 * 1000);
  (void)test::report_sticky_and_destroy(comm, fd, [&] {
    zcx_coll_request_t req = nullptr;
    bool wait = false;
    return post_step(rng, comm, b, false, &req, &wait);
  });
  return 0;
}

int chaos_rank(const Layout& layout, uint64_t seed, Fault fault, std::atomic<int>* failed,
               int rank, int fd) {
  test::use_provider(layout.provider);
  // Over tcp every step goes through the provider (small ones too), over shm through the lane.
  if (std::string(layout.provider) == "tcp") setenv("ZCX_COLL_SHARED_LANE", "0", 1);
  if (layout.two_hosts && rank >= 2 && !test::become_host(kHostB))
    return dprintf(fd, "HOST failed: %s\n", strerror(errno)), 2;
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS)
    return dprintf(fd, "INIT failed: %s\n", zcx_get_last_error()), 2;
  if (zcx_barrier_comm(comm, nullptr) != ZCX_SUCCESS)
    return dprintf(fd, "BARRIER failed: %s\n", zcx_get_last_error()), 2;
  Rng rng{seed};
  const Plan p = plan_of(seed);
  return rank == p.victim ? victim(comm, rng, p, fault, failed, fd)
                          : survivor(comm, rng, p, failed, fd);
}

// How the survivors' messages must name the victim: rank and host.
std::string victim_named(const Layout& layout, int victim) {
  const bool on_b = layout.two_hosts && victim >= 2;
  return test::world_member_named(victim, on_b ? std::string(kHostB) : local_host_name());
}

// One seed: every survivor failed in time, named the victim, stayed failed, destroyed in time.
void check_run(const Layout& layout, Fault fault, uint64_t seed) {
  const Plan p = plan_of(seed);
  test::ForkShared<std::atomic<int>> failed;
  ASSERT_TRUE(failed.ok());
  const std::set<std::string> shm_before = test::zcx_shm_entries();
  std::vector<test::RankResult> res = test::run_rank_processes(
      kRanks, 90 * 1000,
      [&](int rank, int fd) { return chaos_rank(layout, seed, fault, failed.get(), rank, fd); });
  const double fault_at = test::victim_killed_at(res[p.victim]);
  ASSERT_GT(fault_at, 0) << "the victim never faulted: " << res[p.victim].report;
  const std::string named = victim_named(layout, p.victim);
  for (int r = 0; r < kRanks; ++r) {
    if (r == p.victim) continue;
    SCOPED_TRACE("survivor rank " + std::to_string(r) + ": " + res[r].report);
    const test::SurvivorResult s = test::survivor_result(res[r]);
    printf("[chaos] %s seed %llu victim %d step %d%s: rank %d failed %.2f s after the fault: %s\n",
           layout.name, static_cast<unsigned long long>(seed), p.victim, p.step,
           p.large ? " (large)" : "", r, s.at - fault_at, s.message.c_str());
    EXPECT_EQ(res[r].exit_code, 0);
    EXPECT_NE(s.status, -1) << "no result";
    EXPECT_NE(s.status, ZCX_SUCCESS);
    EXPECT_LE(s.at - fault_at, kTimeoutS + 2.0) << "failed too late after the fault";
    EXPECT_NE(s.message.find(named), std::string::npos) << "does not name the victim";
    test::expect_sticky_and_bounded_destroy(s, kTimeoutS + 2.0);
  }
  test::expect_no_new_zcx_shm(shm_before);
}

class CollChaos : public ::testing::TestWithParam<std::tuple<Layout, Fault>> {
 protected:
  void SetUp() override {
    const Layout& layout = std::get<0>(GetParam());
    test::ScopedEnv only("ZCX_PROVIDERS", layout.provider);
    if (providers_selected().empty()) GTEST_SKIP() << layout.provider << " is not built";
    if (layout.two_hosts && !test::can_become_host())
      GTEST_SKIP() << "unshare(CLONE_NEWUTS) is not permitted here (not root)";
  }
};

TEST_P(CollChaos, EverySurvivorFailsInTimeNamingTheVictim) {
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_run(std::get<0>(GetParam()), std::get<1>(GetParam()), seed);
  }
}

std::string chaos_name(const ::testing::TestParamInfo<std::tuple<Layout, Fault>>& info) {
  return std::string(std::get<0>(info.param).name) +
         (std::get<1>(info.param) == Fault::kKill ? "_kill" : "_stop");
}

INSTANTIATE_TEST_SUITE_P(ProvidersAndFaults, CollChaos,
                         ::testing::Combine(::testing::Values(Layout{"shm", "shm", false},
                                                              Layout{"tcp", "tcp", false},
                                                              Layout{"tcp_two_hosts", "tcp", true}),
                                            ::testing::Values(Fault::kKill, Fault::kStop)),
                         chaos_name);

}  // namespace
}  // namespace zcx
