// Communicators come and go without leaving anything behind (3 processes, over shm and over
// tcp). Each rank runs one round to settle what a process keeps for good (configuration,
// loaded shims, the logger), counts its file descriptors, threads and memory mappings, runs
// more rounds, and counts again: the counts must match. A round creates a communicator from
// the launcher's variables, registers a buffer, runs collectives small and large (through the
// shared and bulk lanes in even rounds, through the provider in odd ones), splits off a
// communicator and uses it, and destroys everything; one round in three aborts the
// communicator instead of destroying it. And a communicator that failed because a member
// exited without finalizing leaves nothing behind on the survivors either.
#include "process_ranks.h"

#include "common/config.h"
#include "common/dir_count.h"

#include <zcx/coll.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace zcx {
namespace {

constexpr int kRanks = 3;
constexpr int kRounds = 6;
constexpr size_t kLarge = size_t{4} << 20;  // floats: 16 MiB, more than the bulk lane holds

// A sanitizer's runtime maps memory of its own as it goes (ASan's quarantine and size
// classes, TSan's shadow): under one the mappings are counted but not compared.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCompareMaps = false;
#else
constexpr bool kCompareMaps = true;
#endif

struct Resources {
  int fds = 0, threads = 0, maps = 0;
  bool operator==(const Resources& o) const {
    return fds == o.fds && threads == o.threads && (!kCompareMaps || maps == o.maps);
  }
};

Resources resources_now() {
  Resources r{test::count_dir("/proc/self/fd"), test::count_dir("/proc/self/task"), 0};
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) ++r.maps;
  return r;
}

std::string text(const Resources& r) {
  return std::to_string(r.fds) + " fds, " + std::to_string(r.threads) + " threads, " +
         std::to_string(r.maps) + " mappings";
}

// Collectives of every size class on comm, each result checked; "" or what went wrong.
std::string exercise(zcx_comm_t comm, std::vector<float>& big) {
  int rank = 0, n = 0;
  (void)zcx_comm_rank(comm, &rank);
  (void)zcx_comm_nranks(comm, &n);
  float small[64];
  const float want = static_cast<float>(n * (n + 1) / 2);
  for (size_t count : {sizeof small / sizeof *small, size_t{1} << 18, big.size()}) {
    float* data = count <= 64 ? small : big.data();
    std::fill(data, data + count, static_cast<float>(rank + 1));
    if (zcx_allreduce(data, data, count, ZCX_FLOAT32, ZCX_SUM, comm, nullptr) != ZCX_SUCCESS)
      return "allreduce of " + std::to_string(count) + ": " + zcx_get_last_error();
    if (data[0] != want || data[count - 1] != want)
      return "allreduce of " + std::to_string(count) + ": wrong result";
  }
  std::vector<float> gathered(static_cast<size_t>(n) * 1024);
  if (zcx_allgather(big.data(), gathered.data(), 1024, ZCX_FLOAT32, comm, nullptr) != ZCX_SUCCESS)
    return std::string("allgather: ") + zcx_get_last_error();
  return "";
}

// One communicator's life; the error text when something failed.
std::string round_trip(int round, std::vector<float>& big) {
  zcx_comm_t comm = nullptr, half = nullptr;
  void* reg = nullptr;
  int rank = 0;
  // Odd rounds keep the shared lane off, so every collective crosses the provider.
  setenv("ZCX_COLL_SHARED_LANE", round % 2 ? "0" : "1", 1);
  if (zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS)
    return std::string("init: ") + zcx_get_last_error();
  (void)zcx_comm_rank(comm, &rank);
  std::string error;
  if (zcx_comm_register(comm, big.data(), big.size() * sizeof(float), &reg) != ZCX_SUCCESS)
    error = std::string("register: ") + zcx_get_last_error();
  if (error.empty()) error = exercise(comm, big);
  if (error.empty() && zcx_comm_deregister(comm, reg) != ZCX_SUCCESS)
    error = std::string("deregister: ") + zcx_get_last_error();
  if (error.empty() && zcx_comm_split(comm, rank % 2, rank, &half, nullptr) != ZCX_SUCCESS)
    error = std::string("split: ") + zcx_get_last_error();
  if (error.empty()) error = exercise(half, big);
  if (half != nullptr && zcx_comm_destroy(half) != ZCX_SUCCESS && error.empty())
    error = std::string("destroying the split: ") + zcx_get_last_error();
  // Everyone is past its last operation before anyone aborts (abort is not collective).
  const bool abort = round % 3 == 2;
  if (abort && error.empty() && zcx_barrier_comm(comm, nullptr) != ZCX_SUCCESS)
    error = std::string("barrier: ") + zcx_get_last_error();
  const zcx_status_t end = abort ? zcx_comm_abort(comm) : zcx_comm_destroy(comm);
  if (end != ZCX_SUCCESS && error.empty()) error = std::string("end: ") + zcx_get_last_error();
  return error.empty() ? "" : "round " + std::to_string(round) + ": " + error;
}

int resources_rank(const char* provider, int fd) {
  test::use_provider(provider);
  std::vector<float> big(kLarge);
  const Resources start = resources_now();
  std::string error = round_trip(0, big);
  const Resources before = resources_now();
  for (int round = 1; error.empty() && round <= kRounds; ++round) error = round_trip(round, big);
  const Resources after = resources_now();
  dprintf(fd, "START %s\nBEFORE %s\nAFTER %s\n%s%s", text(start).c_str(), text(before).c_str(),
          text(after).c_str(), error.empty() ? "" : "ERROR ", error.c_str());
  // The first round may map the shims it loads for good, but may keep no fd or thread.
  const bool kept = start.fds != before.fds || start.threads != before.threads;
  return !error.empty() ? 2 : before == after && !kept ? 0 : 1;
}

// Ranks 0 and 1 after a round: a communicator whose rank 2 exits without finalizing. Their
// allreduce fails (naming rank 2), they destroy the communicator, and nothing of it stays.
int survivor_rank(const char* provider, int rank, int fd) {
  test::use_provider(provider);
  std::vector<float> big(kLarge);
  std::string error = round_trip(0, big);
  const Resources before = resources_now();
  zcx_comm_t comm = nullptr;
  if (error.empty() && zcx_comm_init_env(&comm, nullptr) != ZCX_SUCCESS)
    error = std::string("init: ") + zcx_get_last_error();
  if (!error.empty()) return dprintf(fd, "ERROR %s\n", error.c_str()), 2;
  if (rank == 2) return 0;  // exits with the communicator open
  const zcx_status_t st = zcx_allreduce(big.data(), big.data(), big.size(), ZCX_FLOAT32,
                                        ZCX_SUM, comm, nullptr);
  dprintf(fd, "ALLREDUCE %d %s\n", static_cast<int>(st), zcx_get_last_error());
  if (zcx_comm_destroy(comm) != ZCX_SUCCESS)
    dprintf(fd, "DESTROY %s\n", zcx_get_last_error());
  const Resources after = resources_now();
  dprintf(fd, "BEFORE %s\nAFTER %s\n", text(before).c_str(), text(after).c_str());
  return st != ZCX_SUCCESS && before == after ? 0 : 1;
}

class CollResources : public test::ProviderParamTest {};

TEST_P(CollResources, FailedCommunicatorLeavesNothingBehind) {
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", "10");
  const char* provider = GetParam();
  auto results = test::run_rank_processes(
      kRanks, 120 * 1000, [&](int rank, int fd) { return survivor_rank(provider, rank, fd); });
  for (int r = 0; r < kRanks; ++r) {
    printf("[resources] %s rank %d: %s\n", provider, r, results[r].report.c_str());
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << results[r].report;
  }
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(results[r].report.find("rank 2 "), std::string::npos)
        << "the failure does not name rank 2: " << results[r].report;
}

TEST_P(CollResources, RepeatedCommunicatorsLeaveNothingBehind) {
  test::CleanLaunchEnv clean;
  const char* provider = GetParam();
  auto results = test::run_rank_processes(
      kRanks, 180 * 1000, [&](int, int fd) { return resources_rank(provider, fd); });
  for (int r = 0; r < kRanks; ++r) {
    printf("[resources] %s rank %d: %s\n", provider, r, results[r].report.c_str());
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << " (1: counts differ, 2: an "
                                       << "operation failed): " << results[r].report;
  }
}

INSTANTIATE_TEST_SUITE_P(Providers, CollResources, ::testing::Values("shm", "tcp"),
                         test::provider_param_name);

}  // namespace
}  // namespace zcx
