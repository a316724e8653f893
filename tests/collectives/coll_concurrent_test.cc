// Communicators of one job with operations in flight at the same time (3 processes, over shm
// and tcp, shared lane on and off): a parent and the communicator split from it, each with a
// request-based allreduce outstanding, issued in the same order on every rank and in the
// opposite order on one rank; and two threads, each running allreduces on its own
// communicator. MPI and NCCL users rely on both (overlapping groups, e.g. FSDP's hybrid
// sharding). While a split shared its parent's connections, every case failed within its first
// operations ("message with tag ... matches no buffer of the posted receive"). Communicators
// over one context (zcx_comm_init_context) do share connections: overlapping calls on them
// are refused at once.
#include "common/fork_shared.h"
#include "process_ranks.h"

#include <zcx/coll.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace zcx {
namespace {

constexpr int kRanks = 3;
constexpr int kRounds = 8;
constexpr size_t kCount = size_t{1} << 18;  // floats: 1 MiB, ring over the transport

std::string failed(const char* what) { return std::string(what) + ": " + zcx_get_last_error(); }

bool summed(const std::vector<float>& v, int n) {
  return v.front() == float(n * (n + 1) / 2) && v.back() == v.front();
}

// Request-based allreduces on both communicators at once; rank `odd` issues them the other
// way round (-1: nobody does).
std::string overlapped(zcx_comm_t a, zcx_comm_t b, int rank, int n, int odd) {
  std::vector<float> va(kCount), vb(kCount / 4 + 3);
  for (int round = 0; round < kRounds; ++round) {
    std::fill(va.begin(), va.end(), float(rank + 1));
    std::fill(vb.begin(), vb.end(), float(rank + 1));
    zcx_coll_request_t ra = nullptr, rb = nullptr;
    auto post = [&](zcx_comm_t c, std::vector<float>& v, zcx_coll_request_t* r) {
      return zcx_iallreduce(v.data(), v.data(), v.size(), ZCX_FLOAT32, ZCX_SUM, c, nullptr, r);
    };
    const bool swapped = rank == odd;
    if (swapped ? post(b, vb, &rb) || post(a, va, &ra) : post(a, va, &ra) || post(b, vb, &rb))
      return failed("posting");
    if (zcx_coll_wait(ra) != ZCX_SUCCESS || zcx_coll_wait(rb) != ZCX_SUCCESS)
      return failed(("round " + std::to_string(round)).c_str());
    if (!summed(va, n) || !summed(vb, n)) return "round " + std::to_string(round) + ": wrong sums";
  }
  return "";
}

// Allreduces on `c` from this thread; "" or what failed.
std::string allreduces(zcx_comm_t c, int rank, int n, size_t count) {
  std::vector<float> v(count);
  for (int round = 0; round < 4 * kRounds; ++round) {
    std::fill(v.begin(), v.end(), float(rank + 1));
    if (zcx_allreduce(v.data(), v.data(), count, ZCX_FLOAT32, ZCX_SUM, c, nullptr))
      return failed("threaded allreduce");
    if (!summed(v, n)) return "threaded allreduce: wrong sums";
  }
  return "";
}

std::string threaded(zcx_comm_t a, zcx_comm_t b, int rank, int n) {
  std::string ea, eb;
  std::thread t([&] { eb = allreduces(b, rank, n, kCount / 8 + 1); });
  ea = allreduces(a, rank, n, kCount);
  t.join();
  return ea.empty() ? eb : ea;
}

int concurrent_rank(const char* provider, int rank, int fd) {
  test::use_provider(provider);
  zcx_comm_t a = nullptr, b = nullptr;
  if (zcx_comm_init_env(&a, nullptr) != ZCX_SUCCESS)
    return dprintf(fd, "ERROR %s\n", failed("init").c_str()), 2;
  std::string error;
  if (zcx_comm_split(a, 0, kRanks - rank, &b, nullptr) != ZCX_SUCCESS) error = failed("split");
  if (error.empty()) error = overlapped(a, b, rank, kRanks, -1);
  if (error.empty()) error = overlapped(a, b, rank, kRanks, 1);
  if (error.empty()) error = threaded(a, b, rank, kRanks);
  // The split outlives its parent: it has connections of its own.
  if (zcx_comm_destroy(a) != ZCX_SUCCESS && error.empty()) error = failed("destroy");
  if (error.empty() && b != nullptr) error = allreduces(b, rank, kRanks, kCount / 8 + 1);
  if (b != nullptr && zcx_comm_destroy(b) != ZCX_SUCCESS && error.empty()) error = failed("destroy");
  dprintf(fd, "%s%s\n", error.empty() ? "OK" : "ERROR ", error.c_str());
  return error.empty() ? 0 : 2;
}

// Two communicators over one context (zcx_comm_init_context) share its connections: while
// `a` has a request in flight, every kind of call on `b` is refused with INVALID_USAGE
// naming `a`, and neither communicator is harmed (both run correctly afterwards).
std::string refused(zcx_status_t st, const char* what) {
  if (st != ZCX_ERR_INVALID_USAGE) return std::string(what) + ": not refused (" + std::to_string(st) + ")";
  const std::string msg = zcx_get_last_error();
  return msg.find("communicator 'a'") == std::string::npos ? std::string(what) + ": " + msg : "";
}

// Counts of ranks lined up, one per run (shared lane on, off), in memory the forked ranks
// share with the test.
std::atomic<int>* g_lined_up = nullptr;

// Waits until all n ranks of this run have come here (bounded). Until then no rank drives
// `a` (host calls progress only inside zcx calls), so `a`'s allreduce, which needs every
// rank, stays in flight through each rank's checks on `b`, however the ranks are scheduled.
bool line_up(int n) {
  const char* lane = std::getenv("ZCX_COLL_SHARED_LANE");
  std::atomic<int>& count = g_lined_up[lane != nullptr && lane[0] == '0' ? 1 : 0];
  count.fetch_add(1);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (count.load() < n) {
    if (std::chrono::steady_clock::now() > end) return false;
    usleep(100);
  }
  return true;
}

std::string shared_context_calls(zcx_comm_t a, zcx_comm_t b, int rank, int n) {
  std::vector<float> va(kCount, float(rank + 1)), vb(4, float(rank + 1));
  zcx_coll_request_t ra = nullptr, rb = nullptr;
  if (zcx_iallreduce(va.data(), va.data(), va.size(), ZCX_FLOAT32, ZCX_SUM, a, nullptr, &ra))
    return failed("iallreduce on a");
  std::string e = refused(zcx_allreduce(vb.data(), vb.data(), 4, ZCX_FLOAT32, ZCX_SUM, b, nullptr),
                          "allreduce on b");
  if (e.empty())
    e = refused(zcx_iallreduce(vb.data(), vb.data(), 4, ZCX_FLOAT32, ZCX_SUM, b, nullptr, &rb),
                "iallreduce on b");
  if (e.empty())
    e = refused(zcx_coll_send(vb.data(), 1, ZCX_FLOAT32, (rank + 1) % n, b, nullptr), "send on b");
  if (!line_up(n) && e.empty()) e = "the other ranks did not line up within 30 s";
  if (!e.empty()) return e;
  if (zcx_coll_wait(ra) != ZCX_SUCCESS) return failed("a's request");
  if (!summed(va, n)) return "a: wrong sums";
  std::fill(vb.begin(), vb.end(), float(rank + 1));
  std::fill(va.begin(), va.end(), float(rank + 1));
  if (zcx_allreduce(vb.data(), vb.data(), 4, ZCX_FLOAT32, ZCX_SUM, b, nullptr) ||
      zcx_allreduce(va.data(), va.data(), kCount, ZCX_FLOAT32, ZCX_SUM, b, nullptr))
    return failed("b afterwards");
  return summed(vb, n) && summed(va, n) ? "" : "b afterwards: wrong sums";
}

int shared_context_rank(const char* provider, int rank, int fd) {
  test::use_provider(provider);
  zcx_context_t ctx = nullptr;
  zcx_comm_t a = nullptr, b = nullptr;
  zcx_comm_config_t ca, cb;
  zcx_comm_config_init(&ca);
  zcx_comm_config_init(&cb);
  ca.name = "a";
  cb.name = "b";
  std::string error;
  if (zcx_init_from_env(&ctx) || zcx_comm_init_context(&a, ctx, &ca) ||
      zcx_comm_init_context(&b, ctx, &cb))
    error = failed("init");
  if (error.empty()) error = shared_context_calls(a, b, rank, kRanks);
  for (zcx_comm_t c : {b, a})
    if (c != nullptr && zcx_comm_destroy(c) != ZCX_SUCCESS && error.empty()) error = failed("destroy");
  if (ctx != nullptr && zcx_finalize(ctx) != ZCX_SUCCESS && error.empty()) error = failed("finalize");
  dprintf(fd, "%s%s\n", error.empty() ? "OK" : "ERROR ", error.c_str());
  return error.empty() ? 0 : 2;
}

class CollConcurrent : public test::ProviderParamTest {
 protected:
  // Runs `rank_main(provider, rank, fd)` on kRanks processes, lane on then off: all exit 0.
  void expect_every_rank_ok(int (*rank_main)(const char*, int, int), int timeout_ms) {
    test::CleanLaunchEnv clean;
    const char* provider = GetParam();
    auto one = [&](int rank, int fd) { return rank_main(provider, rank, fd); };
    for (const test::LaneRun& run : test::run_lane_on_and_off(kRanks, timeout_ms, one))
      for (int r = 0; r < kRanks; ++r)
        EXPECT_EQ(run.ranks[r].exit_code, 0)
            << provider << " lane " << run.lane << " rank " << r << ": " << run.ranks[r].report;
  }
};

TEST_P(CollConcurrent, CommunicatorsOverOneContextAreRefusedWhileTheOtherIsBusy) {
  test::ForkShared<std::atomic<int>> counts(2);
  ASSERT_TRUE(counts.ok());
  g_lined_up = counts.get();
  expect_every_rank_ok(shared_context_rank, 60 * 1000);
  g_lined_up = nullptr;
}

TEST_P(CollConcurrent, ParentAndSplitRunAtOnce) { expect_every_rank_ok(concurrent_rank, 120 * 1000); }

INSTANTIATE_TEST_SUITE_P(Providers, CollConcurrent, ::testing::Values("shm", "tcp"),
                         test::provider_param_name);

}  // namespace
}  // namespace zcx
