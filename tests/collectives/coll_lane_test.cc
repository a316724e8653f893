// The shared lane (collectives/core/shared_lane.h) over real processes, 4 ranks on this host:
//  - small collectives take it (the request's descriptor says "shared") and give the right
//    results, blocking and request-based, in place and out of place;
//  - ZCX_COLL_SHARED_LANE=0 on one rank only turns it off for every rank (set-up agrees), and
//    results stay right;
//  - every ZCX_COLL_YIELD mode gives the same right results;
//  - a rank SIGKILLed between lane operations: every survivor fails within ZCX_TIMEOUT + 2 s
//    naming it, the error is sticky, and nothing is left in /dev/shm (the segment is a memfd).
// The correctness matrix forces "shared" for every kind x dtype x op (coll_matrix_test);
// disagreeing calls in the lane are in coll_mismatch_process_test.
#include "process_ranks.h"

#include "common/config.h"
#include "core/api_handles.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace zcx {
namespace {

constexpr int kRanks = 4;
constexpr int kVictim = 2;
constexpr double kTimeoutS = 4.0;

// The algorithm the planner chose for a request-based small allreduce (checked result).
// Returns the algorithm name, or "error: ..." / "wrong: ...".
std::string small_allreduce_algo(zcx_comm_t comm, int rank) {
  std::vector<int32_t> in(7), out(7, -1);
  for (int i = 0; i < 7; ++i) in[i] = rank * 100 + i;
  zcx_coll_request_t req = nullptr;
  if (zcx_iallreduce(in.data(), out.data(), in.size(), ZCX_INT32, ZCX_SUM, comm, nullptr, &req))
    return std::string("error: ") + zcx_get_last_error();
  const std::string algo = coll::algo_name(static_cast<coll::Algo>(req->op->desc.algo));
  if (zcx_coll_wait(req)) return std::string("error: ") + zcx_get_last_error();
  for (int i = 0; i < 7; ++i)
    if (out[i] != (0 + 100 + 200 + 300) + kRanks * i) return "wrong: element " + std::to_string(i);
  return algo;
}

// Every kind the lane serves, blocking, in place: broadcast from each root, reduce to each
// root, allgather, barrier. Returns "" or what went wrong.
std::string lane_kinds(zcx_comm_t comm, int rank) {
  for (int root = 0; root < kRanks; ++root) {
    std::vector<uint64_t> b(33, rank == root ? 1000 + root : 0);
    if (zcx_broadcast(b.data(), b.data(), b.size(), ZCX_UINT64, root, comm, nullptr))
      return std::string("broadcast: ") + zcx_get_last_error();
    for (uint64_t v : b)
      if (v != 1000u + root) return "broadcast from " + std::to_string(root) + ": wrong data";
    std::vector<double> r(5, rank + 0.5);
    if (zcx_reduce(r.data(), r.data(), r.size(), ZCX_FLOAT64, ZCX_MAX, root, comm, nullptr))
      return std::string("reduce: ") + zcx_get_last_error();
    if (rank == root && r[4] != kRanks - 0.5) return "reduce max to " + std::to_string(root) + ": wrong";
  }
  std::vector<int16_t> g(3 * kRanks, -1);
  for (int i = 0; i < 3; ++i) g[3 * rank + i] = static_cast<int16_t>(rank * 10 + i);
  if (zcx_allgather(g.data() + 3 * rank, g.data(), 3, ZCX_INT8 /* 3 bytes */, comm, nullptr))
    return std::string("allgather: ") + zcx_get_last_error();
  if (zcx_barrier_comm(comm, nullptr)) return std::string("barrier: ") + zcx_get_last_error();
  return "";
}

// A blocking allreduce too large for the lane (queued, through the transport). "" when right.
std::string large_allreduce(zcx_comm_t comm, int rank) {
  std::vector<int32_t> v(1 << 18, rank + 1);
  if (zcx_allreduce(v.data(), v.data(), v.size(), ZCX_INT32, ZCX_SUM, comm, nullptr))
    return std::string("large allreduce: ") + zcx_get_last_error();
  for (int32_t x : v)
    if (x != kRanks * (kRanks + 1) / 2) return "large allreduce: wrong data";
  return "";
}

// yield: ZCX_COLL_YIELD for every rank (nullptr: unset).
int agreement_rank(bool disable_on_rank1, const char* yield, int rank, int fd) {
  setenv("ZCX_PROVIDERS", "shm", 1);
  setenv("ZCX_COLL_SHARED_LANE", disable_on_rank1 && rank == 1 ? "0" : "1", 1);
  if (yield != nullptr) setenv("ZCX_COLL_YIELD", yield, 1);
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS)
    return dprintf(fd, "INIT failed: %s\n", zcx_get_last_error()), 2;
  std::string first = small_allreduce_algo(comm, rank), second = small_allreduce_algo(comm, rank);
  std::string kinds = lane_kinds(comm, rank) + large_allreduce(comm, rank);
  dprintf(fd, "ALGO %s %s\nKINDS %s\n", first.c_str(), second.c_str(), kinds.empty() ? "ok" : kinds.c_str());
  return zcx_comm_destroy(comm) == ZCX_SUCCESS ? 0 : 2;
}

void expect_algo_everywhere(bool disable_on_rank1, const char* want, const char* yield = nullptr) {
  test::CleanLaunchEnv clean;
  std::vector<test::RankResult> res = test::run_rank_processes(kRanks, 60 * 1000, [&](int rank, int fd) {
    return agreement_rank(disable_on_rank1, yield, rank, fd);
  });
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + res[r].report);
    EXPECT_EQ(res[r].exit_code, 0);
    char a[64] = {}, b[64] = {};
    ASSERT_EQ(sscanf(res[r].report.c_str(), "ALGO %63s %63s", a, b), 2);
    // The first call sets the lane up (through ordinary collectives) and then uses it.
    EXPECT_STREQ(a, want);
    EXPECT_STREQ(b, want);
    EXPECT_NE(res[r].report.find("KINDS ok"), std::string::npos);
  }
}

TEST(CollLane, SmallCollectivesTakeTheLaneWithRightResults) { expect_algo_everywhere(false, "shared"); }

TEST(CollLane, OneRankTurningItOffTurnsItOffForAll) { expect_algo_everywhere(true, "direct"); }

// How waits pace themselves (ZCX_COLL_YIELD; 4 ranks on this 2-CPU VM are oversubscribed, so
// auto yields at once) changes timing only: every mode, and a bad value (warned about, then
// auto), gives the same right results in the lane and through the transport.
TEST(CollLane, EveryYieldModeGivesRightResults) {
  for (const char* mode : {"on", "off", "auto", "sometimes"}) {
    SCOPED_TRACE(std::string("ZCX_COLL_YIELD=") + mode);
    expect_algo_everywhere(false, "shared", mode);
  }
}

// The victim runs lane operations with the others, then dies between two of them.
int kill_rank(int rank, int fd) {
  setenv("ZCX_PROVIDERS", "shm", 1);
  setenv("ZCX_COLL_SHARED_LANE", "1", 1);  // whatever the environment says: the lane is tested
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS)
    return dprintf(fd, "INIT failed: %s\n", zcx_get_last_error()), 2;
  float v = 1;
  zcx_status_t st = ZCX_SUCCESS;
  for (int i = 0; i < 2000 && st == ZCX_SUCCESS; ++i)
    st = zcx_allreduce(&v, &v, 1, ZCX_FLOAT32, ZCX_MIN, comm, nullptr);
  if (st != ZCX_SUCCESS) return dprintf(fd, "WARMUP failed: %s\n", zcx_get_last_error()), 2;
  if (rank == kVictim) {
    dprintf(fd, "KILLED %.6f\n", test::monotonic_s());
    raise(SIGKILL);
  }
  while (st == ZCX_SUCCESS) st = zcx_allreduce(&v, &v, 1, ZCX_FLOAT32, ZCX_MIN, comm, nullptr);
  dprintf(fd, "RESULT %d %.6f\n%s\n", static_cast<int>(st), test::monotonic_s(), zcx_get_last_error());
  usleep(static_cast<useconds_t>((kTimeoutS + 1.5) * 1e6));  // the others fail on their own
  const zcx_status_t destroyed = test::report_sticky_and_destroy(comm, fd, [&] {
    return zcx_allreduce(&v, &v, 1, ZCX_FLOAT32, ZCX_MIN, comm, nullptr);
  });
  return destroyed == ZCX_SUCCESS ? 0 : 3;
}

TEST(CollLane, EverySurvivorNamesARankKilledBetweenLaneOperations) {
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  const std::set<std::string> shm_before = test::zcx_shm_entries();
  std::vector<test::RankResult> res = test::run_rank_processes(kRanks, 60 * 1000, kill_rank);
  const double killed_at = test::victim_killed_at(res[kVictim]);
  ASSERT_GE(killed_at, 0) << res[kVictim].report;
  EXPECT_EQ(res[kVictim].exit_code, 128 + SIGKILL);
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    SCOPED_TRACE("survivor rank " + std::to_string(r) + ": " + res[r].report);
    EXPECT_EQ(res[r].exit_code, 0);
    const test::SurvivorResult s = test::survivor_result(res[r]);
    printf("[lane kill] rank %d: failed %.2f s after the kill, status %d: %s\n", r,
           s.at - killed_at, s.status, s.message.c_str());
    EXPECT_NE(s.status, -1);
    EXPECT_NE(s.status, ZCX_SUCCESS);
    EXPECT_LE(s.at - killed_at, kTimeoutS + 2.0);
    EXPECT_NE(s.message.find("rank 2 "), std::string::npos) << "the dead rank is not named";
    EXPECT_NE(s.message.find("died"), std::string::npos) << "the cause is not given";
    test::expect_sticky_and_bounded_destroy(s, kTimeoutS + 2.0);
  }
  test::expect_no_new_zcx_shm(shm_before);
}

}  // namespace
}  // namespace zcx
