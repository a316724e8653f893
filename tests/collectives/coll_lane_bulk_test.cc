// The bulk lane (collectives/core/lane_bulk.cc) over real processes on this host:
//  - allreduces larger than a lane slot take it (the request's descriptor says "shared") and
//    give exact results for 2, 3 and 4 ranks: sizes of one round, several rounds and a short
//    tail, integer and floating types, sum/prod/max/avg, in place and out of place (also with
//    the results' non-temporal stores), blocking and several requests in flight at once; so
//    do a reduce and a reducescatter, and an allgather and a broadcast when forced (the
//    matrix test forces it for every case);
//  - a ZCX_COLL_SHARED_BULK that differs on one rank turns the lane off for every rank (the
//    segment's size disagrees), and results stay right through the transport;
//  - a broadcast and an allgather beyond a slot take the lane by the model's choice when
//    the ranks share CPUs (4 ranks pinned to one), not with a CPU per rank;
//  - a small-lane call against a bulk-lane call (different counts) fails on every rank with
//    kMismatch, bounded;
//  - a rank SIGKILLed in the middle of a bulk allreduce: every survivor fails within
//    ZCX_TIMEOUT + 2 s naming it.
#include "process_ranks.h"

#include "common/config.h"
#include "core/api_handles.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace zcx {
namespace {

constexpr double kTimeoutS = 4.0;
// Counts: just over a slot (4 KiB), a round and a bit for 2 ranks (1 MiB pieces of int32),
// several rounds with a tail not divisible by any rank count.
constexpr size_t kCounts[] = {1025, 2 * 262144 + 7, 1000003};

int comm_init(zcx_comm_t* comm, int fd) {
  setenv("ZCX_PROVIDERS", "shm", 1);
  setenv("ZCX_COLL_SHARED_LANE", "1", 1);  // whatever the environment says: the lane is tested
  if (zcx_comm_init_env(comm, nullptr) == ZCX_SUCCESS) return 0;
  dprintf(fd, "INIT failed: %s\n", zcx_get_last_error());
  return 2;
}

std::string algo_of(zcx_coll_request_t req) {
  return coll::algo_name(static_cast<coll::Algo>(req->op->desc.algo));
}

// int32 sum of (r + 1) * (i % 1000) + r over ranks r, in place or not. "" when right.
std::string int32_sum(zcx_comm_t comm, int rank, int n, size_t count, bool in_place) {
  std::vector<int32_t> in(count), out(count, -1);
  for (size_t i = 0; i < count; ++i) in[i] = (rank + 1) * static_cast<int32_t>(i % 1000) + rank;
  int32_t* dst = in_place ? in.data() : out.data();
  if (zcx_allreduce(in.data(), dst, count, ZCX_INT32, ZCX_SUM, comm, nullptr))
    return std::string("int32 sum: ") + zcx_get_last_error();
  for (size_t i = 0; i < count; ++i) {
    const int32_t want = n * (n + 1) / 2 * static_cast<int32_t>(i % 1000) + n * (n - 1) / 2;
    if (dst[i] != want)
      return "int32 sum of " + std::to_string(count) + (in_place ? " in place" : "") +
             ": element " + std::to_string(i) + " is " + std::to_string(dst[i]);
  }
  return "";
}

// uint8 prod (wrapping), int64 max, float64 avg: one count each, out of place.
uint8_t prod_in(int r, size_t i) { return static_cast<uint8_t>(i + 3 * static_cast<size_t>(r) + 1); }
int64_t max_in(int r, size_t i) {
  return static_cast<int64_t>((i * 7 + static_cast<size_t>(r) * 13) % 101) - 50;
}

std::string other_types(zcx_comm_t comm, int rank, int n) {
  std::vector<uint8_t> p(5001), pw(5001, 1);
  for (size_t i = 0; i < p.size(); ++i) p[i] = prod_in(rank, i);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < p.size(); ++i) pw[i] = static_cast<uint8_t>(pw[i] * prod_in(r, i));
  if (zcx_allreduce(p.data(), p.data(), p.size(), ZCX_UINT8, ZCX_PROD, comm, nullptr) || p != pw)
    return "uint8 prod wrong or failed";
  std::vector<int64_t> m(600001), mo(m.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = max_in(rank, i);
  if (zcx_allreduce(m.data(), mo.data(), m.size(), ZCX_INT64, ZCX_MAX, comm, nullptr))
    return "int64 max failed";
  for (size_t i = 0; i < m.size(); ++i) {
    int64_t want = INT64_MIN;
    for (int r = 0; r < n; ++r) want = std::max(want, max_in(r, i));
    if (mo[i] != want) return "int64 max: element " + std::to_string(i);
  }
  std::vector<double> a(300001), ao(a.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = rank + 0.5 * static_cast<double>(i);
  if (zcx_allreduce(a.data(), ao.data(), a.size(), ZCX_FLOAT64, ZCX_AVG, comm, nullptr))
    return "float64 avg failed";
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(i), want = (n - 1) / 2.0 + 0.5 * x;
    if (std::fabs(ao[i] - want) > 1e-9 * (1 + x)) return "float64 avg: element " + std::to_string(i);
  }
  return "";
}

// Three request-based allreduces in flight at once; each must say "shared" and be right.
std::string requests_in_flight(zcx_comm_t comm, int rank, int n) {
  constexpr int kReqs = 3;
  std::vector<std::vector<int32_t>> bufs(kReqs);
  zcx_coll_request_t reqs[kReqs] = {};
  for (int k = 0; k < kReqs; ++k) {
    bufs[k].assign(kCounts[k], rank + k);
    if (zcx_iallreduce(bufs[k].data(), bufs[k].data(), kCounts[k], ZCX_INT32, ZCX_SUM, comm,
                       nullptr, &reqs[k]))
      return std::string("iallreduce: ") + zcx_get_last_error();
  }
  std::string algos;
  for (int k = 0; k < kReqs; ++k) {
    algos += algo_of(reqs[k]) + " ";
    if (zcx_coll_wait(reqs[k])) return std::string("wait: ") + zcx_get_last_error();
    for (int32_t v : bufs[k])
      if (v != n * (n - 1) / 2 + n * k) return "request " + std::to_string(k) + ": wrong data";
  }
  return algos == "shared shared shared " ? "" : "requests took " + algos;
}

// A reduce to the last rank and a reducescatter (in place) also take the lane by the model's
// choice; an allgather and a broadcast take it when forced (ZCX_ALGO).
std::string other_kinds(zcx_comm_t comm, int rank, int n) {
  constexpr size_t kCount = 300001;
  std::vector<int32_t> v(kCount * n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i % 977) + rank;
  const int32_t ranks_sum = n * (n - 1) / 2;
  zcx_coll_request_t req = nullptr;
  if (zcx_ireduce(v.data(), v.data(), kCount, ZCX_INT32, ZCX_SUM, n - 1, comm, nullptr, &req))
    return std::string("ireduce: ") + zcx_get_last_error();
  std::string algos = algo_of(req);
  if (zcx_coll_wait(req)) return std::string("reduce: ") + zcx_get_last_error();
  for (size_t i = 0; rank == n - 1 && i < kCount; ++i)
    if (v[i] != n * static_cast<int32_t>(i % 977) + ranks_sum) return "reduce: element " + std::to_string(i);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i % 977) + rank;
  int32_t* mine = v.data() + kCount * rank;  // in place: the own block of the send buffer
  if (zcx_ireducescatter(v.data(), mine, kCount, ZCX_INT32, ZCX_SUM, comm, nullptr, &req))
    return std::string("ireducescatter: ") + zcx_get_last_error();
  algos += " " + algo_of(req);
  if (zcx_coll_wait(req)) return std::string("reducescatter: ") + zcx_get_last_error();
  for (size_t i = 0; i < kCount; ++i)
    if (mine[i] != n * static_cast<int32_t>((kCount * rank + i) % 977) + ranks_sum)
      return "reducescatter: element " + std::to_string(i);
  config::ScopedOverride force("ZCX_ALGO", "allgather:shared,broadcast:shared");
  for (size_t i = 0; i < kCount; ++i) mine[i] = rank * 7 + static_cast<int32_t>(i % 5);
  if (zcx_iallgather(mine, v.data(), kCount, ZCX_INT32, comm, nullptr, &req))  // in place
    return std::string("iallgather: ") + zcx_get_last_error();
  algos += " " + algo_of(req);
  if (zcx_coll_wait(req)) return std::string("allgather: ") + zcx_get_last_error();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<int32_t>(i / kCount) * 7 + static_cast<int32_t>(i % kCount % 5))
      return "allgather: element " + std::to_string(i);
  std::vector<int64_t> b(kCount, rank == 1 ? 42 : -1);
  if (zcx_ibroadcast(b.data(), b.data(), kCount, ZCX_INT64, 1, comm, nullptr, &req))
    return std::string("ibroadcast: ") + zcx_get_last_error();
  algos += " " + algo_of(req);
  if (zcx_coll_wait(req)) return std::string("broadcast: ") + zcx_get_last_error();
  for (int64_t x : b)
    if (x != 42) return "broadcast: wrong data";
  return algos == "shared shared shared shared" ? "" : "took " + algos;
}

int correctness_rank(int rank, int n, int fd) {
  zcx_comm_t comm = nullptr;
  if (int rc = comm_init(&comm, fd)) return rc;
  std::string err;
  for (size_t count : kCounts)
    for (bool in_place : {false, true})
      if (err.empty()) err = int32_sum(comm, rank, n, count, in_place);
  {
    // The results' non-temporal stores (out of place) and their skipping (in place), which
    // the default threshold keeps for larger sizes than these.
    config::ScopedOverride nt_min("ZCX_COLL_NT_MIN", "64K");
    for (bool in_place : {false, true})
      if (err.empty()) err = int32_sum(comm, rank, n, kCounts[2], in_place);
  }
  if (err.empty()) err = other_types(comm, rank, n);
  if (err.empty()) err = requests_in_flight(comm, rank, n);
  if (err.empty()) err = other_kinds(comm, rank, n);
  dprintf(fd, "RESULT %s\n", err.empty() ? "ok" : err.c_str());
  return zcx_comm_destroy(comm) == ZCX_SUCCESS ? 0 : 2;
}

class BulkLane : public ::testing::TestWithParam<int> {};

TEST_P(BulkLane, AllreducesOfEverySizeAreRight) {
  const int n = GetParam();
  test::CleanLaunchEnv clean;
  std::vector<test::RankResult> res = test::run_rank_processes(n, 120 * 1000, [&](int rank, int fd) {
    return correctness_rank(rank, n, fd);
  });
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + res[r].report);
    EXPECT_EQ(res[r].exit_code, 0);
    EXPECT_NE(res[r].report.find("RESULT ok"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, BulkLane, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "np" + std::to_string(i.param);
                         });

// Rank 1 asks for a smaller bulk segment: rank 0's segment has not the size rank 1 expects,
// so no member uses the lane, and the transport carries the allreduce.
int budget_rank(int rank, int fd) {
  if (rank == 1) setenv("ZCX_COLL_SHARED_BULK", "4M", 1);
  zcx_comm_t comm = nullptr;
  if (int rc = comm_init(&comm, fd)) return rc;
  std::vector<int32_t> v(262144, rank + 1);
  zcx_coll_request_t req = nullptr;
  std::string algo = "error";
  if (zcx_iallreduce(v.data(), v.data(), v.size(), ZCX_INT32, ZCX_SUM, comm, nullptr, &req) == ZCX_SUCCESS) {
    algo = algo_of(req);
    if (zcx_coll_wait(req) != ZCX_SUCCESS) algo = "error";
  }
  bool right = true;
  for (int32_t x : v) right = right && x == 1 + 2 + 3;
  dprintf(fd, "ALGO %s %s\n", algo.c_str(), right ? "right" : "wrong");
  return zcx_comm_destroy(comm) == ZCX_SUCCESS ? 0 : 2;
}

TEST(BulkLaneSetup, DifferentBudgetsTurnTheLaneOffForAll) {
  test::CleanLaunchEnv clean;
  std::vector<test::RankResult> res = test::run_rank_processes(3, 60 * 1000, budget_rank);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + res[r].report);
    EXPECT_EQ(res[r].exit_code, 0);
    char algo[64] = {}, right[16] = {};
    ASSERT_EQ(sscanf(res[r].report.c_str(), "ALGO %63s %15s", algo, right), 2);
    EXPECT_STRNE(algo, "shared");
    EXPECT_STRNE(algo, "error");
    EXPECT_STREQ(right, "right");
  }
}

// Pins this process to one CPU of its mask: the first for every rank (one_cpu), else the
// rank-th. False when the mask has no such CPU.
bool pin(int rank, bool one_cpu) {
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return false;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask) || (!one_cpu && seen++ < rank)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0;
  }
  return false;
}

// A 1 MiB broadcast and allgather (256 KiB per rank, beyond a slot): the algorithm each
// took and whether both results were right. Every rank pins itself before the bootstrap,
// so each member reads the others' final masks.
int placement_rank(int rank, int n, bool one_cpu, int fd) {
  if (!pin(rank, one_cpu)) return dprintf(fd, "PIN failed\n"), 2;
  zcx_comm_t comm = nullptr;
  if (int rc = comm_init(&comm, fd)) return rc;
  constexpr size_t kCount = 65536;  // int32
  std::vector<int32_t> b(kCount, rank == 0 ? 7 : -1), all(kCount * n, -1), mine(kCount, rank);
  zcx_coll_request_t bq = nullptr, gq = nullptr;
  if (zcx_ibroadcast(b.data(), b.data(), kCount, ZCX_INT32, 0, comm, nullptr, &bq))
    return dprintf(fd, "CALL failed: %s\n", zcx_get_last_error()), 2;
  std::string algos = algo_of(bq);  // before the wait, which frees the request
  if (zcx_coll_wait(bq) ||
      zcx_iallgather(mine.data(), all.data(), kCount, ZCX_INT32, comm, nullptr, &gq))
    return dprintf(fd, "CALL failed: %s\n", zcx_get_last_error()), 2;
  algos += " " + algo_of(gq);
  if (zcx_coll_wait(gq)) return dprintf(fd, "CALL failed: %s\n", zcx_get_last_error()), 2;
  bool right = std::all_of(b.begin(), b.end(), [](int32_t x) { return x == 7; });
  for (size_t i = 0; i < all.size(); ++i)
    right = right && all[i] == static_cast<int32_t>(i / kCount);
  dprintf(fd, "ALGOS %s %s\n", algos.c_str(), right ? "right" : "wrong");
  return zcx_comm_destroy(comm) == ZCX_SUCCESS ? 0 : 2;
}

// The algorithms every rank reported: {broadcast, allgather}.
std::vector<std::pair<std::string, std::string>> placement_run(int n, bool one_cpu) {
  test::CleanLaunchEnv clean;
  std::vector<test::RankResult> res = test::run_rank_processes(n, 60 * 1000, [&](int rank, int fd) {
    return placement_rank(rank, n, one_cpu, fd);
  });
  std::vector<std::pair<std::string, std::string>> algos;
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + res[r].report);
    EXPECT_EQ(res[r].exit_code, 0);
    char bcast[32] = {}, gather[32] = {}, right[16] = {};
    EXPECT_EQ(sscanf(res[r].report.c_str(), "ALGOS %31s %31s %15s", bcast, gather, right), 3);
    EXPECT_STREQ(right, "right");
    algos.emplace_back(bcast, gather);
  }
  return algos;
}

// More ranks than CPUs: the copies of all ranks share the CPUs, and the bulk lane copies
// fewer bytes in all than chain and ring, so the model sends broadcasts and allgathers there
// too (the members agree on the reading at the lane's set-up). With a CPU per rank it
// does not.
TEST(BulkLaneSetup, BroadcastAndAllgatherTakeTheLaneWhenRanksShareCpus) {
  for (const auto& [bcast, gather] : placement_run(4, true)) {
    EXPECT_EQ(bcast, "shared");
    EXPECT_EQ(gather, "shared");
  }
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  if (CPU_COUNT(&mask) < 2) GTEST_SKIP() << "one CPU only: no placement with a CPU per rank";
  for (const auto& [bcast, gather] : placement_run(2, false)) {
    EXPECT_NE(bcast, "shared");
    EXPECT_NE(gather, "shared");
  }
}

// Rank 0 calls a slot-sized allreduce where the others call a bulk-lane one.
int mismatch_rank(int rank, int fd) {
  zcx_comm_t comm = nullptr;
  if (int rc = comm_init(&comm, fd)) return rc;
  float warm = 1;
  if (zcx_allreduce(&warm, &warm, 1, ZCX_FLOAT32, ZCX_SUM, comm, nullptr)) return 2;  // lane set up
  std::vector<float> v(rank == 0 ? 1000 : 200000, 1.0f);
  const double t0 = test::monotonic_s();
  zcx_status_t st = zcx_allreduce(v.data(), v.data(), v.size(), ZCX_FLOAT32, ZCX_SUM, comm, nullptr);
  dprintf(fd, "RESULT %d %.3f\n%s\n", static_cast<int>(st), test::monotonic_s() - t0, zcx_get_last_error());
  zcx_comm_abort(comm);
  return 0;
}

TEST(BulkLaneSetup, SlotCallAgainstBulkCallFailsEveryRank) {
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  std::vector<test::RankResult> res = test::run_rank_processes(3, 60 * 1000, mismatch_rank);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + res[r].report);
    EXPECT_EQ(res[r].exit_code, 0);
    int st = -1;
    double s = -1;
    ASSERT_EQ(sscanf(res[r].report.c_str(), "RESULT %d %lf", &st, &s), 2);
    EXPECT_EQ(st, ZCX_ERR_MISMATCH);
    EXPECT_LT(s, kTimeoutS) << "a mismatch is seen at once, not timed out";
  }
}

// The victim starts a bulk allreduce, drives it a little (it is then mid-operation: its
// contribution published, rounds begun), and dies.
constexpr int kRanks = 4;
constexpr int kVictim = 2;

int kill_rank(int rank, int fd) {
  zcx_comm_t comm = nullptr;
  if (int rc = comm_init(&comm, fd)) return rc;
  std::vector<float> v(2u << 20, 1.0f);  // 8 MiB: several rounds for every rank count
  zcx_status_t st = ZCX_SUCCESS;
  for (int i = 0; i < 3 && st == ZCX_SUCCESS; ++i)
    st = zcx_allreduce(v.data(), v.data(), v.size(), ZCX_FLOAT32, ZCX_MAX, comm, nullptr);
  if (st != ZCX_SUCCESS) return dprintf(fd, "WARMUP failed: %s\n", zcx_get_last_error()), 2;
  if (rank == kVictim) {
    zcx_coll_request_t req = nullptr;
    if (zcx_iallreduce(v.data(), v.data(), v.size(), ZCX_FLOAT32, ZCX_MAX, comm, nullptr, &req)) return 2;
    int done = 0;
    for (int i = 0; i < 200 && !done; ++i) (void)zcx_coll_test(req, &done);
    dprintf(fd, "KILLED %.6f %s\n", test::monotonic_s(), done ? "after" : "during");
    raise(SIGKILL);
  }
  while (st == ZCX_SUCCESS) st = zcx_allreduce(v.data(), v.data(), v.size(), ZCX_FLOAT32, ZCX_MAX, comm, nullptr);
  dprintf(fd, "RESULT %d %.6f\n%s\n", static_cast<int>(st), test::monotonic_s(), zcx_get_last_error());
  zcx_comm_abort(comm);
  return 0;
}

TEST(BulkLaneFaults, EverySurvivorNamesARankKilledMidAllreduce) {
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  std::vector<test::RankResult> res = test::run_rank_processes(kRanks, 60 * 1000, kill_rank);
  const double killed_at = test::victim_killed_at(res[kVictim]);
  ASSERT_GE(killed_at, 0) << res[kVictim].report;
  EXPECT_EQ(res[kVictim].exit_code, 128 + SIGKILL);
  const bool mid = res[kVictim].report.find("during") != std::string::npos;
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    SCOPED_TRACE("survivor rank " + std::to_string(r) + ": " + res[r].report);
    EXPECT_EQ(res[r].exit_code, 0);
    const test::SurvivorResult s = test::survivor_result(res[r]);
    const std::string& message = s.message;
    printf("[bulk kill] rank %d: failed %.2f s after the kill (%s), status %d: %s\n", r,
           s.at - killed_at, mid ? "mid-operation" : "between", s.status, message.c_str());
    EXPECT_NE(s.status, -1);
    EXPECT_NE(s.status, ZCX_SUCCESS);
    EXPECT_LE(s.at - killed_at, kTimeoutS + 2.0);
    EXPECT_NE(message.find("rank 2 "), std::string::npos) << "the dead rank is not named";
    EXPECT_NE(message.find("died"), std::string::npos) << "the cause is not given";
  }
}

}  // namespace
}  // namespace zcx
