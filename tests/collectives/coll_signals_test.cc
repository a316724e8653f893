// A process that takes signals all the time (a sampling profiler's SIGPROF, a Python
// runtime's SIGALRM) still bootstraps and completes its collectives: 3 processes over shm and
// tcp, each with a handler installed without SA_RESTART (so every blocking system call it is
// in returns EINTR) and a timer that fires every 100 us of wall time and of CPU time.
#include "process_ranks.h"

#include <zcx/coll.h>

#include <signal.h>
#include <sys/time.h>

#include <cstdio>
#include <string>
#include <vector>

namespace zcx {
namespace {

constexpr int kRanks = 3;
volatile sig_atomic_t g_signals = 0;

void count_signal(int) { g_signals = g_signals + 1; }

void start_signal_storm() {
  struct sigaction sa {};
  sa.sa_handler = count_signal;  // no SA_RESTART
  sigaction(SIGALRM, &sa, nullptr);
  sigaction(SIGPROF, &sa, nullptr);
  const itimerval every{{0, 100}, {0, 100}};
  setitimer(ITIMER_REAL, &every, nullptr);
  setitimer(ITIMER_PROF, &every, nullptr);
}

// Allreduces from 1 element to 4 Mi floats, checked; "" or what failed.
std::string allreduces(zcx_comm_t comm) {
  int rank = 0, n = 0;
  (void)zcx_comm_rank(comm, &rank);
  (void)zcx_comm_nranks(comm, &n);
  std::vector<float> data(size_t{4} << 20);
  for (size_t count = 1; count <= data.size(); count *= 16) {
    std::fill(data.begin(), data.begin() + static_cast<ptrdiff_t>(count), float(rank + 1));
    if (zcx_allreduce(data.data(), data.data(), count, ZCX_FLOAT32, ZCX_SUM, comm, nullptr))
      return "allreduce of " + std::to_string(count) + ": " + zcx_get_last_error();
    if (data[0] != float(n * (n + 1) / 2) || data[count - 1] != data[0])
      return "allreduce of " + std::to_string(count) + ": wrong result";
  }
  return "";
}

int signalled_rank(const char* provider, int fd) {
  test::use_provider(provider);
  start_signal_storm();
  zcx_comm_t comm = nullptr;
  std::string error;
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS)
    error = std::string("init: ") + zcx_get_last_error();
  if (error.empty()) error = allreduces(comm);
  if (comm != nullptr && zcx_comm_destroy(comm) != ZCX_SUCCESS && error.empty())
    error = std::string("destroy: ") + zcx_get_last_error();
  const itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  setitimer(ITIMER_PROF, &off, nullptr);
  dprintf(fd, "SIGNALS %d\n%s%s\n", static_cast<int>(g_signals), error.empty() ? "" : "ERROR ",
          error.c_str());
  return error.empty() ? 0 : 2;
}

class CollSignals : public test::ProviderParamTest {};

TEST_P(CollSignals, CollectivesCompleteUnderASignalStorm) {
  test::CleanLaunchEnv clean;
  const char* provider = GetParam();
  auto rank_main = [&](int, int fd) { return signalled_rank(provider, fd); };
  for (const test::LaneRun& run : test::run_lane_on_and_off(kRanks, 120 * 1000, rank_main)) {
    for (int r = 0; r < kRanks; ++r) {
      const std::string& said = run.ranks[r].report;
      printf("[signals] %s lane %s rank %d: %s", provider, run.lane, r, said.c_str());
      EXPECT_EQ(run.ranks[r].exit_code, 0) << "rank " << r << ": " << said;
      int signals = 0;
      EXPECT_EQ(sscanf(said.c_str(), "SIGNALS %d", &signals), 1);
      EXPECT_GT(signals, 10) << "the storm did not happen";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Providers, CollSignals, ::testing::Values("shm", "tcp"),
                         test::provider_param_name);

}  // namespace
}  // namespace zcx
