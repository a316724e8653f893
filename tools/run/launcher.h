// Starts the ranks, copies their output, watches them and stops them all when one fails.
//
// One thread, one poll() loop over the ranks' stdout/stderr pipes and a signalfd (SIGCHLD,
// SIGINT, SIGTERM, SIGHUP). Every wait has a deadline: the job timeout, the SIGTERM grace,
// a bound after SIGKILL, and a bound on draining output after the last rank exited.
#pragma once

#include "options.h"
#include "output.h"
#include "rank_env.h"

#include "common/fd.h"

#include <sched.h>
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zcx::run {

class Launcher {
 public:
  explicit Launcher(const Options& options) : options_(options) {}
  // Runs the job to the end; returns zcx-run's exit code.
  int run();

 private:
  struct Rank {
    pid_t pid = -1;
    bool running = false;
    PrefixedStream out, err;
  };
  enum class Phase { kRunning, kStopping, kKilling };

  bool setup();
  void plan_binding();
  bool spawn(int rank, const JobEnv& job);
  void event_loop();
  bool finished();
  int poll_timeout_ms() const;
  void poll_once();
  void check_deadlines();
  void read_signals();
  void reap_children();
  void on_rank_exit(int rank, int wstatus);
  void fail(int code, const std::string& message);
  void stop(int sig);
  void signal_groups(int sig);
  std::string running_ranks() const;
  bool any_running() const;

  const Options& options_;
  std::vector<Rank> ranks_;
  std::vector<cpu_set_t> cpu_of_rank_;  // empty: ranks are not bound
  UniqueFd signal_fd_;
  UniqueFd dev_null_;
  sigset_t child_mask_{};  // the mask the ranks start with (ours before blocking)
  Phase phase_ = Phase::kRunning;
  bool failed_ = false;
  int stop_signal_ = 0;  // the last signal stop() sent
  int exit_code_ = 0;
  int64_t job_deadline_ns_ = 0;    // 0: none
  int64_t phase_deadline_ns_ = 0;  // grace, or the bound after SIGKILL
  int64_t drain_deadline_ns_ = 0;  // set when the last rank has exited
};

}  // namespace zcx::run
