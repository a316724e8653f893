// ZCX_STATS' overlap column over real processes (2 ranks, shm and tcp): blocking allreduces
// overlap nothing; allgathers posted with zcx_iallgather, then left to run while the caller
// computes (polling zcx_coll_test between stretches of work, as a training loop does), show
// most of their time in flight overlapped. Rank 1 posts 5 ms after rank 0 (ranks drift
// apart; 5 ms is well above a call's work, even under ThreadSanitizer): rank 0's allgathers
// wait for it while rank 0 computes (overlapped), and rank 1 finds rank 0's data already
// there and its own fitting in the transport's buffers, so it finishes inside
// zcx_iallgather: no overlap, rightly (so do both when they post at the same moment). Each
// rank's summary goes to its report.
#include "process_ranks.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace zcx {
namespace {

constexpr int kRanks = 2;
constexpr size_t kCount = 64 * 1024;  // int32 elements per rank: 256 KiB
constexpr int kCalls = 20;

// Busy work for `us` microseconds: the caller's own computation.
void compute_for(double us) {
  const double until = test::monotonic_s() + us / 1e6;
  volatile uint64_t x = 0;
  while (test::monotonic_s() < until) x = x + 1;
}

// One nonblocking allgather, with compute and a test every 200 us until it is done.
int overlapped_allgather(zcx_comm_t comm, int rank, std::vector<int32_t>& mine,
                         std::vector<int32_t>& all) {
  if (rank == 1) compute_for(5000);
  zcx_coll_request_t req = nullptr;
  if (zcx_iallgather(mine.data(), all.data(), kCount, ZCX_INT32, comm, nullptr, &req)) return 11;
  for (int done = 0; !done;) {
    compute_for(200);
    if (zcx_coll_test(req, &done)) return 12;
  }
  return 0;
}

int stats_rank(const char* provider, int rank, int fd) {
  setenv("ZCX_PROVIDERS", provider, 1);
  setenv("ZCX_SOCKET_IFNAME", "lo", 1);
  setenv("ZCX_STATS", "1", 1);
  zcx_comm_t comm = nullptr;
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS) return 2;
  std::vector<int32_t> mine(kCount, rank + 1), all(kCount * kRanks, 0), sum(kCount, 0);
  for (int i = 0; i < kCalls; ++i) {
    if (zcx_allreduce(mine.data(), sum.data(), kCount, ZCX_INT32, ZCX_SUM, comm, nullptr)) return 3;
    if (int rc = overlapped_allgather(comm, rank, mine, all)) return rc;
  }
  if (sum[kCount - 1] != 3 || all[0] != 1 || all[kCount * kRanks - 1] != 2) return 4;
  if (dup2(fd, STDERR_FILENO) < 0) return 5;  // the summary, printed at destroy, to the report
  return zcx_comm_destroy(comm) == ZCX_SUCCESS ? 0 : 6;
}

class CollStatsProcesses : public test::ProviderParamTest {};

TEST_P(CollStatsProcesses, BlockingCallsOverlapNothingAndPostedOnesOverlapCompute) {
  const char* provider = GetParam();
  test::CleanLaunchEnv clean;
  std::vector<test::RankResult> res = test::run_rank_processes(
      kRanks, 60 * 1000, [&](int rank, int fd) { return stats_rank(provider, rank, fd); });
  const std::regex blocking(R"(allreduce +[a-z]+ +[0-9]+ calls +[0-9]+ bytes +[0-9.]+ ms in flight +([0-9.]+)% overlapped)");
  const std::regex posted(R"(allgather +[a-z]+ +([0-9]+) calls +[0-9]+ bytes +[0-9.]+ ms in flight +([0-9.]+)% overlapped)");
  for (int r = 0; r < kRanks; ++r) {
    const std::string& report = res[r].report;
    ASSERT_EQ(res[r].exit_code, 0) << "rank " << r << ": " << report;
    int allreduce_rows = 0;
    for (std::sregex_iterator it(report.begin(), report.end(), blocking), end; it != end; ++it, ++allreduce_rows)
      EXPECT_EQ((*it)[1], "0.0") << "a blocking call overlaps nothing: " << report;
    EXPECT_GE(allreduce_rows, 1) << report;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(report, m, posted)) << report;
    EXPECT_EQ(m[1], std::to_string(kCalls)) << report;
    if (r == 0) {
      EXPECT_GE(std::stod(m[2]), 50.0) << "posted allgathers ran while the caller computed: " << report;
    }
    printf("[stats] %s rank %d: %s\n", provider, r, m[0].str().c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Providers, CollStatsProcesses, ::testing::Values("shm", "tcp"),
                         test::provider_param_name);

}  // namespace
}  // namespace zcx
