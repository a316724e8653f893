// A member that leaves is dead only if it left without finalizing (3 processes, over shm and
// over tcp). Rank 2 joins a barrier and then leaves in one of three ways; rank 1 sleeps and
// then sends rank 0 a message, so rank 0's receive stalls for more than the second after
// which a stalled operation looks for members that have exited (schedule/executor.cc).
//   - destroy: rank 2 destroys its communicator (which finalizes its context) and exits.
//     It had finished everything it was part of: rank 0's receive must succeed.
//   - exit: rank 2 exits without finalizing: rank 0 must fail naming rank 2 as dead.
//   - abort: rank 2 aborts its communicator and exits: not a clean departure either.
// And once rank 2 destroys its communicator before a collective that ranks 0 and 1 call:
// they wait for it until ZCX_TIMEOUT, and the timeout says that rank 2 finalized and left.
// Before departures were published (base/departures.h) the first case failed as the second.
#include "process_ranks.h"

#include "common/config.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace zcx {
namespace {

enum class Leave { kDestroy, kExit, kAbort };

constexpr int kRanks = 3;
constexpr int kLeaver = 2;
constexpr double kTimeoutS = 5.0;
constexpr double kSenderSleepS = 2.5;  // rank 0 checks for exited members after 1 s
constexpr size_t kCount = size_t{1} << 18;  // int32 elements: 1 MiB

int32_t val(size_t i) { return static_cast<int32_t>(i * 2654435761u); }

int leaver(zcx_comm_t comm, Leave how, int fd) {
  if (how == Leave::kDestroy && zcx_comm_destroy(comm) != ZCX_SUCCESS)
    return dprintf(fd, "DESTROY failed: %s\n", zcx_get_last_error()), 3;
  if (how == Leave::kAbort && zcx_comm_abort(comm) != ZCX_SUCCESS)
    return dprintf(fd, "ABORT failed: %s\n", zcx_get_last_error()), 3;
  dprintf(fd, "LEFT\n");
  return 0;  // kExit: the child _exits with the communicator still open
}

int sender(zcx_comm_t comm, int fd) {
  usleep(static_cast<useconds_t>(kSenderSleepS * 1e6));
  std::vector<int32_t> out(kCount);
  for (size_t i = 0; i < kCount; ++i) out[i] = val(i);
  const zcx_status_t st = zcx_coll_send(out.data(), kCount, ZCX_INT32, 0, comm, nullptr);
  dprintf(fd, "SENT %d\n", static_cast<int>(st));
  (void)zcx_comm_destroy(comm);
  return 0;
}

// "RESULT <status> <seconds waited> <1 if the data is right>" then the message.
int receiver(zcx_comm_t comm, int fd) {
  std::vector<int32_t> in(kCount, -1);
  const double t0 = test::monotonic_s();
  const zcx_status_t st = zcx_coll_recv(in.data(), kCount, ZCX_INT32, 1, comm, nullptr);
  const double waited = test::monotonic_s() - t0;
  bool right = st == ZCX_SUCCESS;
  for (size_t i = 0; right && i < kCount; ++i) right = in[i] == val(i);
  dprintf(fd, "RESULT %d %.3f %d\n%s\n", static_cast<int>(st), waited, right ? 1 : 0,
          st == ZCX_SUCCESS ? "" : zcx_get_last_error());
  (void)zcx_comm_destroy(comm);
  return 0;
}

// Ranks 0 and 1 after rank 2 left: an allreduce that needs rank 2 (through the shared lane,
// where nothing but the timeout ends the wait). Reported like receiver().
int stranded(zcx_comm_t comm, int fd) {
  int32_t x = 1;
  const double t0 = test::monotonic_s();
  const zcx_status_t st = zcx_allreduce(&x, &x, 1, ZCX_INT32, ZCX_SUM, comm, nullptr);
  dprintf(fd, "RESULT %d %.3f 0\n%s\n", static_cast<int>(st), test::monotonic_s() - t0,
          st == ZCX_SUCCESS ? "" : zcx_get_last_error());
  (void)zcx_comm_destroy(comm);
  return 0;
}

int departure_rank(const char* provider, Leave how, bool then_allreduce, int rank, int fd) {
  setenv("ZCX_PROVIDERS", provider, 1);
  setenv("ZCX_SOCKET_IFNAME", "lo", 1);
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS)
    return dprintf(fd, "INIT failed: %s\n", zcx_get_last_error()), 2;
  int32_t one = 1;  // connects the ring links and lines everyone up
  if (zcx_allreduce(&one, &one, 1, ZCX_INT32, ZCX_SUM, comm, nullptr) ||
      zcx_barrier_comm(comm, nullptr))
    return dprintf(fd, "WARMUP failed: %s\n", zcx_get_last_error()), 2;
  if (rank == kLeaver) return leaver(comm, how, fd);
  if (then_allreduce) return stranded(comm, fd);
  return rank == 1 ? sender(comm, fd) : receiver(comm, fd);
}

struct ReceiverReport {
  int status = -1;
  double waited_s = -1;
  int right = 0;
  std::string message;
};

ReceiverReport run_departure(const char* provider, Leave how, bool then_allreduce = false) {
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  auto rank_main = [&](int rank, int fd) {
    return departure_rank(provider, how, then_allreduce, rank, fd);
  };
  std::vector<test::RankResult> res = test::run_rank_processes(kRanks, 60 * 1000, rank_main);
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(res[r].exit_code, 0) << "rank " << r << ": " << res[r].report;
  EXPECT_NE(res[kLeaver].report.find("LEFT"), std::string::npos) << res[kLeaver].report;
  ReceiverReport out;
  std::istringstream in(res[0].report);
  std::string line;
  while (std::getline(in, line))
    if (sscanf(line.c_str(), "RESULT %d %lf %d", &out.status, &out.waited_s, &out.right) == 3)
      std::getline(in, out.message);
  printf("[departure] %s: rank 0 status %d after %.2f s%s%s\n", provider, out.status,
         out.waited_s, out.message.empty() ? "" : ": ", out.message.c_str());
  return out;
}

class CollDeparture : public test::ProviderParamTest {};

TEST_P(CollDeparture, FinalizedMemberIsNotCalledDead) {
  const ReceiverReport r = run_departure(GetParam(), Leave::kDestroy);
  EXPECT_EQ(r.status, ZCX_SUCCESS) << r.message;
  EXPECT_EQ(r.right, 1) << "the received data is wrong";
  EXPECT_GE(r.waited_s, kSenderSleepS - 0.5) << "the receive did not stall as the test needs";
}

bool names_dead_leaver(const ReceiverReport& r) {
  return r.message.find("rank " + std::to_string(kLeaver) + " ") != std::string::npos &&
         r.message.find("died") != std::string::npos;
}

TEST_P(CollDeparture, MemberThatExitsWithoutFinalizingIsNamedDead) {
  const ReceiverReport r = run_departure(GetParam(), Leave::kExit);
  EXPECT_EQ(r.status, ZCX_ERR_REMOTE) << r.message;
  EXPECT_TRUE(names_dead_leaver(r)) << r.message;
  EXPECT_LT(r.waited_s, kSenderSleepS) << "named only after the sender came";
}

TEST_P(CollDeparture, MemberThatAbortsIsNamedDead) {
  const ReceiverReport r = run_departure(GetParam(), Leave::kAbort);
  EXPECT_EQ(r.status, ZCX_ERR_REMOTE) << r.message;
  EXPECT_TRUE(names_dead_leaver(r)) << r.message;
  EXPECT_LT(r.waited_s, kSenderSleepS) << "named only after the sender came";
}

TEST_P(CollDeparture, TimeoutSaysThatAMemberLeftBeforeTheOperation) {
  const ReceiverReport r = run_departure(GetParam(), Leave::kDestroy, /*then_allreduce=*/true);
  EXPECT_EQ(r.status, ZCX_ERR_TIMEOUT) << r.message;
  EXPECT_NE(r.message.find(test::world_member_named(kLeaver, local_host_name())),
            std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("finalized and exited before this operation ended"), std::string::npos)
      << r.message;
  EXPECT_LE(r.waited_s, kTimeoutS + 2.0);
}

INSTANTIATE_TEST_SUITE_P(Providers, CollDeparture, ::testing::Values("shm", "tcp"),
                         test::provider_param_name);

}  // namespace
}  // namespace zcx
