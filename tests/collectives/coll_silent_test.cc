// A silent member is named by every survivor, not only by its neighbours (4 processes, over
// shm through the shared lane, and over tcp without it). Rank 2 is alive but does not take part:
//   - absent: it is busy outside zcx and never calls the allreduce the others call;
//   - stalled: it posts the allreduce, polls it once before the others call, then stops (as
//     a stopped process, or a thread busy elsewhere, would).
// The others wait until ZCX_TIMEOUT. The ranks linked to rank 2 time out naming it; the rest
// wait behind them and fail when those give up, which used to name only the neighbour that
// gave up. Each member of a host publishes the collective it last called and when it last
// polled (base/departures.h), so every survivor's error must name rank 2 and say which of the
// two it is.
// Two hosts: ranks 2 and 3 run under another host name (a UTS namespace; they still share
// this machine's network), so ranks 0 and 1 have no page of rank 2 and ask it over TCP
// (base/activity_server.h). There rank 2 also stops itself (SIGSTOP): its answering thread
// stops with it, and the ranks of the other host name it as not answering.
#include "process_ranks.h"

#include "common/config.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace zcx {
namespace {

enum class Silence { kAbsent, kStalled, kStopped };

constexpr int kRanks = 4;
constexpr int kSilent = 2;
constexpr double kTimeoutS = 4.0;
constexpr double kSilentS = kTimeoutS + 4.0;  // longer than any survivor waits
constexpr size_t kCount = size_t{8} << 20;   // float32 elements: 32 MiB, never done alone
constexpr const char* kHostB = "zcx-silent-host-b";  // ranks 2 and 3 with two hosts

// Rank 2: away for kSilentS, either before the call or inside it, then leaves.
int silent_rank(zcx_comm_t comm, Silence how, std::vector<float>& buf, int fd) {
  zcx_coll_request_t req = nullptr;
  if (how != Silence::kAbsent) {
    if (zcx_iallreduce(buf.data(), buf.data(), kCount, ZCX_FLOAT32, ZCX_SUM, comm, nullptr,
                       &req) != ZCX_SUCCESS)
      return dprintf(fd, "POST failed: %s\n", zcx_get_last_error()), 3;
    int done = 0;  // before the others call: nothing to move yet (later polls could finish)
    (void)zcx_coll_test(req, &done);
  }
  if (how == Silence::kStopped) test::stop_self_for(kSilentS, fd);
  else usleep(static_cast<useconds_t>(kSilentS * 1e6));
  dprintf(fd, "AWAY\n");
  (void)zcx_comm_abort(comm);  // its operation can no longer complete
  return 0;
}

// "RESULT <status> wrong <elements>" then the message. It calls after rank 2 polled its
// allreduce once, so that poll cannot have moved anything.
int waiting_rank(zcx_comm_t comm, std::vector<float>& buf, int fd) {
  usleep(500 * 1000);
  const zcx_status_t st =
      zcx_allreduce(buf.data(), buf.data(), kCount, ZCX_FLOAT32, ZCX_SUM, comm, nullptr);
  size_t wrong = 0;
  for (float x : buf) wrong += x != 16.0f;  // 1 on every rank, then summed twice over 4
  dprintf(fd, "RESULT %d wrong %zu\n%s\n", static_cast<int>(st), wrong,
          st == ZCX_SUCCESS ? "" : zcx_get_last_error());
  (void)zcx_comm_destroy(comm);
  return 0;
}

int silent_test_rank(const char* provider, Silence how, bool two_hosts, int rank, int fd) {
  setenv("ZCX_PROVIDERS", provider, 1);
  setenv("ZCX_SOCKET_IFNAME", "lo", 1);
  // Over tcp without the shared lane the allreduce is a ring: only rank 2's neighbours wait
  // on it, the others on them (over shm, every member waits on rank 2's lane slot).
  if (std::string(provider) == "tcp") setenv("ZCX_COLL_SHARED_LANE", "0", 1);
  if (two_hosts) setenv("ZCX_ALGO", "allreduce:ring", 1);  // not the hierarchical one
  if (two_hosts && rank >= 2 && !test::become_host(kHostB))
    return dprintf(fd, "HOST failed: %s\n", strerror(errno)), 2;
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS)
    return dprintf(fd, "INIT failed: %s\n", zcx_get_last_error()), 2;
  std::vector<float> buf(kCount, 1.0f);  // the warm-up connects every link the allreduce uses
  if (zcx_allreduce(buf.data(), buf.data(), kCount, ZCX_FLOAT32, ZCX_SUM, comm, nullptr))
    return dprintf(fd, "WARMUP failed: %s\n", zcx_get_last_error()), 2;
  if (rank == kSilent) return silent_rank(comm, how, buf, fd);
  return waiting_rank(comm, buf, fd);
}

// What rank r's error must say of rank 2.
using Expected = std::function<const char*(int r)>;

void expect_every_survivor_names_rank_2(const char* provider, Silence how, const Expected& why,
                                        bool two_hosts = false) {
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  auto rank_main = [&](int rank, int fd) {
    return silent_test_rank(provider, how, two_hosts, rank, fd);
  };
  std::vector<test::RankResult> res = test::run_rank_processes(kRanks, 60 * 1000, rank_main);
  EXPECT_NE(res[kSilent].report.find("AWAY"), std::string::npos) << res[kSilent].report;
  const std::string named =
      test::world_member_named(kSilent, two_hosts ? std::string(kHostB) : local_host_name());
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << "rank " << r << ": " << res[r].report;
    if (r == kSilent) continue;
    int status = -1;
    EXPECT_EQ(sscanf(res[r].report.c_str(), "RESULT %d", &status), 1) << res[r].report;
    EXPECT_NE(status, ZCX_SUCCESS) << "rank " << r;
    const size_t at = res[r].report.find(named);
    EXPECT_TRUE(at != std::string::npos && res[r].report.find(why(r), at) != std::string::npos)
        << "rank " << r << " does not say that rank 2 " << why(r) << ": " << res[r].report;
    printf("[silent] %s rank %d: %s", provider, r, res[r].report.c_str());  // the message
  }
}

class CollSilent : public test::ProviderParamTest {};

TEST_P(CollSilent, EverySurvivorNamesTheMemberThatNeverCalled) {
  expect_every_survivor_names_rank_2(GetParam(), Silence::kAbsent,
                                     [](int) { return "has not called this operation"; });
}

TEST_P(CollSilent, EverySurvivorNamesTheMemberThatStoppedPolling) {
  expect_every_survivor_names_rank_2(GetParam(), Silence::kStalled, [](int) {
    return "called this operation but is not polling it";
  });
}

// Only tcp reaches another host here (shm is for one host; ib and ucx need their devices).
TEST(CollSilentTwoHosts, EverySurvivorNamesTheMemberThatNeverCalled) {
  if (!test::can_become_host())
    GTEST_SKIP() << "unshare(CLONE_NEWUTS) is not permitted here (not root)";
  expect_every_survivor_names_rank_2("tcp", Silence::kAbsent,
                                     [](int) { return "has not called this operation"; }, true);
}

TEST(CollSilentTwoHosts, EverySurvivorNamesTheStoppedMember) {
  if (!test::can_become_host())
    GTEST_SKIP() << "unshare(CLONE_NEWUTS) is not permitted here (not root)";
  expect_every_survivor_names_rank_2("tcp", Silence::kStopped, [](int r) {
    return r == 3 ? "called this operation but is not polling it"  // its page, on host b
                  : "did not answer an activity query within 1 s";
  }, true);
}

INSTANTIATE_TEST_SUITE_P(Providers, CollSilent, ::testing::Values("shm", "tcp"),
                         test::provider_param_name);

}  // namespace
}  // namespace zcx
