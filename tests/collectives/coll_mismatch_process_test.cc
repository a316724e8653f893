// Ranks that disagree on a collective, over real processes (4 ranks, shm and tcp): one rank
// passes a different count, dtype, op, root or a different collective. Every rank must
// return an error within ZCX_TIMEOUT + 2 s (never a hang, never a success with data from
// the disagreeing rank), at least one with ZCX_ERR_MISMATCH whose message names a peer.
// The lane-* scenarios disagree on small calls, which go through the shared lane;
// algo-setting makes the same call with one rank's ZCX_ALGO set otherwise.
// coll_fault_test has the in-process version over the fake transport.
//
// One process group per provider runs every scenario: a control communicator (never given
// a disagreeing call) ships a fresh unique id per scenario and lines the ranks up; each
// scenario runs on its own communicator, since the first error is sticky.
#include "process_ranks.h"

#include "common/config.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <sstream>
#include <vector>

namespace zcx {
namespace {

constexpr int kRanks = 4;
constexpr double kTimeoutS = 2.0;
constexpr size_t kCount = 4099;

struct Scenario {
  const char* name;
  const char* algo;  // ZCX_ALGO
  int odd;           // the rank that disagrees
  // Runs this rank's call on buf ((kCount + 1) * kRanks int32 elements, all = rank + 1).
  std::function<zcx_status_t(zcx_comm_t, int rank, std::vector<int32_t>& buf)> call;
  // Known gap: ranks whose part involved only agreeing peers may complete (coll.h: "a rank
  // whose operation only involved agreeing peers may complete with the result they
  // define"); the issue wants an error there too. Such a rank is accepted when its buffer
  // holds the result the agreeing ranks define (never a wrong result): `agreed(rank, buf)`.
  const char* known_bug = nullptr;
  std::function<bool(int rank, const std::vector<int32_t>& buf)> agreed = nullptr;
  const char* says = nullptr;  // what a mismatch message must contain, when given
};

zcx_status_t allreduce(zcx_comm_t c, std::vector<int32_t>& b, size_t count, zcx_dtype_t dt,
                       zcx_redop_t op) {
  return zcx_allreduce(b.data(), b.data(), count, dt, op, c, nullptr);
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> out;
  for (const char* algo : {"allreduce:ring", "allreduce:tree", "allreduce:rhd"})
    out.push_back({"count", algo, 2, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                     return allreduce(c, b, r == 2 ? kCount + 1 : kCount, ZCX_INT32, ZCX_SUM); }});
  out.push_back({"dtype", "allreduce:tree", 1, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   return allreduce(c, b, kCount, r == 1 ? ZCX_UINT32 : ZCX_INT32, ZCX_SUM); }});
  out.push_back({"op", "allreduce:ring", 3, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   return allreduce(c, b, kCount, ZCX_INT32, r == 3 ? ZCX_MAX : ZCX_SUM); }});
  out.push_back({"kind", "allreduce:ring,broadcast:chain", 0,
                 [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   if (r == 0) return zcx_broadcast(b.data(), b.data(), kCount, ZCX_INT32, 0, c, nullptr);
                   return allreduce(c, b, kCount, ZCX_INT32, ZCX_SUM); }});
  out.push_back({"root", "broadcast:binomial", 1, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   return zcx_broadcast(b.data(), b.data(), kCount, ZCX_INT32, r == 1 ? 1 : 0, c, nullptr); },
                 "the root of a broadcast, and receivers fed only by agreeing ranks, complete "
                 "although rank 1 named another root",
                 [](int r, const std::vector<int32_t>& b) {  // root 0's data (all 1), rest untouched
                   for (size_t i = 0; i < b.size(); ++i)
                     if (b[i] != (i < kCount ? 1 : r + 1)) return false;
                   return true; }});
  // The same call, planned differently: rank 1's ZCX_ALGO differs (a per-rank environment).
  out.push_back({"algo-setting", "allreduce:ring", 1, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   if (r == 1) config::set_override("ZCX_ALGO", "allreduce:tree");
                   return allreduce(c, b, kCount, ZCX_INT32, ZCX_SUM); },
                 nullptr, nullptr, "planned it differently: the selector's settings (ZCX_ALGO"});
  out.push_back({"reduce-vs-allgather", "reduce:chain", 3, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   if (r == 3) return zcx_allgather(b.data() + 3, b.data(), 1, ZCX_INT32, c, nullptr);
                   return zcx_reduce(b.data(), b.data(), kCount, ZCX_INT32, ZCX_SUM, 0, c, nullptr); }});
  // The shared lane (small calls, all ranks on this host): the slot's descriptor, or the
  // operation a peer announced when it is not in the lane at all.
  out.push_back({"lane-count", "allreduce:shared", 2, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   return allreduce(c, b, r == 2 ? 5 : 4, ZCX_INT32, ZCX_SUM); }});
  out.push_back({"lane-op", "allreduce:shared", 3, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   return allreduce(c, b, 4, ZCX_INT32, r == 3 ? ZCX_MAX : ZCX_SUM); }});
  out.push_back({"lane-kind", "allreduce:shared,broadcast:shared", 0,
                 [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   if (r == 0) return zcx_broadcast(b.data(), b.data(), 4, ZCX_INT32, 0, c, nullptr);
                   return allreduce(c, b, 4, ZCX_INT32, ZCX_SUM); }});
  out.push_back({"lane-vs-ring", "allreduce:shared", 1, [](zcx_comm_t c, int r, std::vector<int32_t>& b) {
                   return allreduce(c, b, r == 1 ? kCount : 4, ZCX_INT32, ZCX_SUM); }});
  return out;
}

// One scenario on this rank: a fresh communicator from an id rank 0 ships over `control`.
// Reports "CASE <i> <status> <seconds> <destroy seconds> <agreed result>" and the message on
// the next line.
int run_scenario(zcx_comm_t control, int rank, size_t i, const Scenario& s, int fd) {
  zcx_unique_id_t id{};
  if (rank == 0 && zcx_get_unique_id(&id) != ZCX_SUCCESS) return 2;
  if (zcx_broadcast(&id, &id, sizeof id, ZCX_UINT8, 0, control, nullptr)) return 2;
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_rank(&comm, kRanks, &id, rank, nullptr) != ZCX_SUCCESS) return 2;
  if (zcx_barrier_comm(comm, nullptr)) return 2;  // connected and lined up
  std::vector<int32_t> buf((kCount + 1) * kRanks, rank + 1);
  config::set_override("ZCX_ALGO", s.algo);  // (a communicator caches its choices)
  const double t0 = test::monotonic_s();
  zcx_status_t st = s.call(comm, rank, buf);
  const double took = test::monotonic_s() - t0;
  std::string msg = st == ZCX_SUCCESS ? "" : zcx_get_last_error();
  const bool agreed = s.agreed && s.agreed(rank, buf);
  config::clear_override("ZCX_ALGO");
  const double d0 = test::monotonic_s();
  (void)zcx_comm_destroy(comm);
  dprintf(fd, "CASE %zu %d %.3f %.3f %d\n%s\n", i, static_cast<int>(st), took,
          test::monotonic_s() - d0, agreed ? 1 : 0, msg.c_str());
  return zcx_barrier_comm(control, nullptr) == ZCX_SUCCESS ? 0 : 2;
}

int mismatch_rank(const char* provider, int rank, int fd) {
  setenv("ZCX_PROVIDERS", provider, 1);
  setenv("ZCX_SOCKET_IFNAME", "lo", 1);
  zcx_comm_t control = nullptr;
  if (zcx_comm_init_env(&control, nullptr) != ZCX_SUCCESS) return 2;
  std::vector<Scenario> all = scenarios();
  for (size_t i = 0; i < all.size(); ++i)
    if (int rc = run_scenario(control, rank, i, all[i], fd)) {
      dprintf(fd, "CONTROL failed in scenario %zu: %s\n", i, zcx_get_last_error());
      return rc;
    }
  return zcx_comm_destroy(control) == ZCX_SUCCESS ? 0 : 2;
}

struct Outcome {
  int status = -1;
  double took = -1, destroy = -1;
  int agreed = 0;
  std::string message;
};

// outcomes[scenario] of one rank's report.
std::vector<Outcome> parse(const std::string& text, size_t nscenarios) {
  std::vector<Outcome> out(nscenarios);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t i = 0;
    Outcome o;
    if (sscanf(line.c_str(), "CASE %zu %d %lf %lf %d", &i, &o.status, &o.took, &o.destroy,
               &o.agreed) != 5 ||
        i >= nscenarios)
      continue;
    std::getline(in, o.message);
    out[i] = o;
  }
  return out;
}

class CollMismatchProcesses : public test::ProviderParamTest {};

TEST_P(CollMismatchProcesses, EveryRankFailsBoundedAndOneNamesTheMismatch) {
  const char* provider = GetParam();
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  const std::vector<Scenario> all = scenarios();
  std::vector<test::RankResult> res = test::run_rank_processes(
      kRanks, 100 * 1000, [&](int rank, int fd) { return mismatch_rank(provider, rank, fd); });
  std::vector<std::vector<Outcome>> by_rank;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << "rank " << r << ": " << res[r].report;
    by_rank.push_back(parse(res[r].report, all.size()));
  }
  for (size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(std::string(all[i].name) + " (" + all[i].algo + ", rank " +
                 std::to_string(all[i].odd) + " differs)");
    int mismatches = 0, saying = 0;
    for (int r = 0; r < kRanks; ++r) {
      const Outcome& o = by_rank[r][i];
      EXPECT_NE(o.status, -1) << "rank " << r << " reported nothing";
      if (o.status == ZCX_SUCCESS && all[i].known_bug) {
        EXPECT_TRUE(o.agreed) << "rank " << r << " completed with a wrong result";
        printf("[mismatch] known gap (%s): rank %d completed\n", all[i].known_bug, r);
      } else {
        EXPECT_NE(o.status, ZCX_SUCCESS) << "rank " << r << " completed a disagreeing collective";
      }
      EXPECT_LE(o.took, kTimeoutS + 2.0) << "rank " << r << ": " << o.message;
      EXPECT_LE(o.destroy, kTimeoutS + 2.0) << "rank " << r << " destroy";
      if (o.status == ZCX_ERR_MISMATCH) {
        ++mismatches;
        EXPECT_NE(o.message.find("rank "), std::string::npos) << o.message;
        saying += all[i].says && o.message.find(all[i].says) != std::string::npos;
      }
      printf("[mismatch] %s %s/%s rank %d: status %d after %.2f s: %s\n", provider, all[i].name,
             all[i].algo, r, o.status, o.took, o.message.c_str());
    }
    EXPECT_GE(mismatches, 1);
    if (all[i].says) {
      EXPECT_GE(saying, 1) << "no mismatch message says: " << all[i].says;
    }
  }
}

// The full requirement for the scenarios with a known gap: an error on every rank.
TEST_P(CollMismatchProcesses, EveryRankFailsAlsoWhenItOnlySends) {
  GTEST_SKIP() << "known bug: with a binomial broadcast where rank 1 passes another root, "
                  "the root (and a receiver fed only by agreeing ranks) returns ZCX_SUCCESS; "
                  "see the colltests report. Remove this line to run the strict check.";
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  std::vector<test::RankResult> res = test::run_rank_processes(
      kRanks, 100 * 1000, [&](int rank, int fd) { return mismatch_rank(GetParam(), rank, fd); });
  const std::vector<Scenario> all = scenarios();
  for (int r = 0; r < kRanks; ++r) {
    std::vector<Outcome> got = parse(res[r].report, all.size());
    for (size_t i = 0; i < all.size(); ++i) EXPECT_NE(got[i].status, ZCX_SUCCESS) << all[i].name << " rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Providers, CollMismatchProcesses, ::testing::Values("shm", "tcp"),
                         test::provider_param_name);

}  // namespace
}  // namespace zcx
