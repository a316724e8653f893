// Helpers for the multi-process collective tests: fork N ranks that find each other
// zcx-run style (ZCX_RANK/ZCX_NRANKS/ZCX_ROOT/ZCX_SECRET on loopback), give each a pipe to
// report through, and collect every child's exit code and report text with a bound.
#pragma once

#include "bootstrap/test_util.h"

#include "base/registry.h"
#include "common/socket.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace zcx::test {

// CLOCK_MONOTONIC in seconds: comparable between processes of this machine.
inline double monotonic_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct RankResult {
  int exit_code = -1;  // exit status, 128 + signal, or 255 when killed at the deadline
  std::string report;  // everything the rank wrote to its report fd
};

// What a rank runs: fn(rank, report_fd) returns the child's exit code.
using RankMain = std::function<int(int rank, int report_fd)>;

namespace detail {

inline void drain_pipe(int fd, std::string* out, char* open) {
  char buf[4096];
  ssize_t got = read(fd, buf, sizeof buf);
  if (got > 0) out->append(buf, static_cast<size_t>(got));
  else if (got == 0 || (errno != EINTR && errno != EAGAIN)) *open = 0;
}

inline int decode_wait_status(int st) {
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace detail

// Forks n ranks running fn with the launcher variables of one fresh LaunchJob set, reads
// their reports while they run, and waits at most timeout_ms in all; ranks still alive then
// are killed (exit_code 255). Only the child's own pipe end stays open in each child.
inline std::vector<RankResult> run_rank_processes(int n, int timeout_ms, const RankMain& fn) {
  std::string why;
  const LaunchJob job = fresh_launch_job(&why);
  std::vector<RankResult> results(static_cast<size_t>(n));
  if (job.root.empty()) {  // no rank could have found the others: say why instead of forking
    for (RankResult& r : results) r = {255, "no launch job (a free port and a secret): " + why};
    return results;
  }
  std::vector<int> read_fds(static_cast<size_t>(n), -1);
  std::vector<pid_t> pids(static_cast<size_t>(n), -1);
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) break;
    pids[r] = fork_child([&, r, w = fds[1]] {
      for (int q = 0; q < r; ++q) close(read_fds[q]);
      close(fds[0]);
      set_rank_env(r, n, job);
      return fn(r, w);
    });
    close(fds[1]);
    read_fds[r] = fds[0];
  }
  std::vector<char> open(static_cast<size_t>(n), 1), reaped(static_cast<size_t>(n), 0);
  const double deadline = monotonic_s() + timeout_ms / 1000.0;
  for (int left = n;;) {
    std::vector<pollfd> pfds;
    for (int r = 0; r < n; ++r)
      if (open[r] && read_fds[r] >= 0) pfds.push_back({read_fds[r], POLLIN, 0});
    if (!pfds.empty()) poll(pfds.data(), pfds.size(), 20);
    else usleep(10000);
    for (int r = 0; r < n; ++r)
      if (open[r] && read_fds[r] >= 0) {
        pollfd p{read_fds[r], POLLIN, 0};
        if (poll(&p, 1, 0) > 0) detail::drain_pipe(read_fds[r], &results[r].report, &open[r]);
      }
    for (int r = 0; r < n; ++r) {
      int st = 0;
      if (!reaped[r] && pids[r] > 0 && waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        results[r].exit_code = detail::decode_wait_status(st);
        reaped[r] = 1;
        --left;
      }
    }
    bool any_open = false;
    for (int r = 0; r < n; ++r) any_open = any_open || (open[r] && read_fds[r] >= 0);
    if (left == 0 && !any_open) break;
    if (monotonic_s() > deadline) {
      for (int r = 0; r < n; ++r)
        if (!reaped[r] && pids[r] > 0) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          results[r].exit_code = 255;
          results[r].report += "\n[killed by the test: still running at the deadline]\n";
        }
      break;
    }
  }
  for (int fd : read_fds)
    if (fd >= 0) close(fd);
  return results;
}

// What a rank sets before it makes a communicator: only `provider`, over loopback.
inline void use_provider(const char* provider) {
  setenv("ZCX_PROVIDERS", provider, 1);
  setenv("ZCX_SOCKET_IFNAME", "lo", 1);
}

struct LaneRun {
  const char* lane;  // ZCX_COLL_SHARED_LANE of the run
  std::vector<RankResult> ranks;
};

// run_rank_processes twice: with the shared lane on, then off (every collective through
// the provider).
inline std::vector<LaneRun> run_lane_on_and_off(int n, int timeout_ms, const RankMain& fn) {
  std::vector<LaneRun> runs;
  for (const char* lane : {"1", "0"}) {
    ScopedEnv scoped("ZCX_COLL_SHARED_LANE", lane);
    runs.push_back({lane, run_rank_processes(n, timeout_ms, fn)});
  }
  return runs;
}

// The zcx entries of /dev/shm (segments are unlinked at once; one left there leaked).
inline std::set<std::string> zcx_shm_entries() {
  std::set<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.find("zcx") != std::string::npos) out.insert(name);
    }
    closedir(d);
  }
  return out;
}

// Fails the test for each zcx entry of /dev/shm that was not there `before` (a leak).
inline void expect_no_new_zcx_shm(const std::set<std::string>& before) {
  for (const std::string& name : zcx_shm_entries())
    EXPECT_TRUE(before.count(name)) << "left behind in /dev/shm: " << name;
}

// Whether process `pid` is stopped (state T in /proc/<pid>/stat).
inline bool process_stopped(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = fopen(path, "r");
  if (f == nullptr) return false;
  char state = 0;
  const int got = fscanf(f, "%*d (%*[^)]) %c", &state);
  fclose(f);
  return got == 1 && state == 'T';
}

// Stops this process (SIGSTOP) for `seconds`: a child of it sends SIGCONT then, since a
// stopped process cannot wake itself. `fd` (a report pipe) is closed in that child. With
// `wake_early` (read in the child, so it must look at memory shared across fork), the child
// sends SIGCONT as soon as that holds once this process is seen stopped. Where no child can
// be made it sleeps instead, and says so on `fd`.
inline void stop_self_for(double seconds, int fd, const std::function<bool()>& wake_early = {}) {
  const pid_t self = getpid();
  const pid_t waker = fork();
  if (waker == 0) {
    close(fd);
    const double until = monotonic_s() + seconds;
    while (monotonic_s() < until && !(wake_early && process_stopped(self) && wake_early()))
      usleep(10 * 1000);
    kill(self, SIGCONT);
    _exit(0);
  }
  if (waker < 0) {
    dprintf(fd, "NOT STOPPED (fork failed): slept instead\n");
    usleep(static_cast<useconds_t>(seconds * 1e6));
    return;
  }
  raise(SIGSTOP);
  waitpid(waker, nullptr, 0);
}

// Gives this process a host name of its own (a UTS namespace, so the real host is untouched):
// to zcx it is then on another host (the bootstrap groups ranks by host name, and the host
// identity decides where shm may be used), while it shares this machine's network.
inline bool become_host(const std::string& name) {
  return unshare(CLONE_NEWUTS) == 0 && sethostname(name.c_str(), name.size()) == 0;
}

// Whether this machine lets a process do so (root, or a user namespace), tried in a child.
inline bool can_become_host() {
  const pid_t child = fork();
  if (child == 0) _exit(become_host("zcx-host-probe") ? 0 : 1);
  int st = 0;
  return child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// The fault tests' reports. The victim writes "KILLED <monotonic_s> ..." before it raises
// its signal; a survivor writes "RESULT <status> <monotonic_s>" and its error on the next
// line, then (report_sticky_and_destroy) "STICKY <status> <seconds>" and
// "DESTROY <status> <seconds>". Returns the victim's time of death, or -1 when it did not say.
inline double victim_killed_at(const RankResult& victim) {
  const std::string& said = victim.report;
  double at = -1;
  if (sscanf(said.c_str() + std::min(said.find("KILLED"), said.size()), "KILLED %lf", &at) != 1) return -1;
  return at;
}

// A survivor's ending after its error: `again` (one more operation, which must fail at once:
// the error sticks), then zcx_comm_destroy (which must return in bounded time). Returns
// destroy's status.
template <typename Again>
inline zcx_status_t report_sticky_and_destroy(zcx_comm_t comm, int fd, Again&& again) {
  double t0 = monotonic_s();
  const zcx_status_t sticky = again();
  dprintf(fd, "STICKY %d %.3f\n", static_cast<int>(sticky), monotonic_s() - t0);
  t0 = monotonic_s();
  const zcx_status_t destroyed = zcx_comm_destroy(comm);
  dprintf(fd, "DESTROY %d %.3f\n", static_cast<int>(destroyed), monotonic_s() - t0);
  return destroyed;
}

struct SurvivorResult {
  int status = -1;  // -1: no RESULT line
  double at = 0;
  std::string message;
  int sticky = -1;  // -1: no STICKY line
  double sticky_s = -1, destroy_s = -1;  // -1: no STICKY / DESTROY line
};

inline SurvivorResult survivor_result(const RankResult& survivor) {
  SurvivorResult out;
  std::istringstream in(survivor.report);
  std::string line;
  while (std::getline(in, line)) {
    if (sscanf(line.c_str(), "RESULT %d %lf", &out.status, &out.at) == 2) std::getline(in, out.message);
    sscanf(line.c_str(), "STICKY %d %lf", &out.sticky, &out.sticky_s);
    sscanf(line.c_str(), "DESTROY %*d %lf", &out.destroy_s);
  }
  return out;
}

// What every fault test asks of a survivor's ending: the error stuck, at once (a missing
// STICKY line fails too), and destroy returned within `destroy_bound_s`.
inline void expect_sticky_and_bounded_destroy(const SurvivorResult& s, double destroy_bound_s) {
  EXPECT_GT(s.sticky, ZCX_SUCCESS) << "took an operation after failing, or did not say";
  EXPECT_LE(s.sticky_s, 1.0) << "the sticky error should be immediate";
  EXPECT_GE(s.destroy_s, 0.0) << "zcx_comm_destroy did not return";
  EXPECT_LE(s.destroy_s, destroy_bound_s);
}

// How the library names member `rank` (on `host`) of the world communicator in an error
// (comm.cc's member description).
inline std::string world_member_named(int rank, const std::string& host) {
  const std::string r = std::to_string(rank);
  return "rank " + r + " of 'world' (context rank " + r + ", host " + host + ")";
}

// A multi-process test over one provider, named by the parameter; skipped where that
// provider is not built. Instantiate with provider_param_name for readable test names.
class ProviderParamTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ScopedEnv only("ZCX_PROVIDERS", GetParam());
    if (providers_selected().empty()) GTEST_SKIP() << GetParam() << " is not built in this tree";
  }
};

inline std::string provider_param_name(const ::testing::TestParamInfo<const char*>& info) {
  return info.param;
}

}  // namespace zcx::test
