// Helpers for the bootstrap and context tests: environment scoping, running N ranks as
// threads or forked processes.
#pragma once

#include "common/bootstrap/bootstrap.h"
#include "common/config.h"
#include "run/rank_env.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace zcx::test {

// Sets (or unsets, value nullopt) an environment variable for the scope of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Unsets every launcher variable the bootstrap looks at, for the scope of the object.
class CleanLaunchEnv {
 public:
  CleanLaunchEnv() {
    for (const char* n :
         {"ZCX_RANK", "ZCX_NRANKS", "ZCX_ROOT", "ZCX_SECRET", "ZCX_LOCAL_RANK", "ZCX_RUN_JOB",
          "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
          "OMPI_MCA_ess_base_jobid", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
          "SLURM_JOB_ID", "SLURM_STEP_ID"})
      envs_.emplace_back(std::make_unique<ScopedEnv>(n, std::nullopt));
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> envs_;
};

// One launch, as zcx-run makes it (run/rank_env.h): a loopback root on a port that was free
// a moment ago (rank 0's bootstrap binds it) and a fresh random secret. Tests run side by
// side under ctest -j; with a secret of its own, a rank that reached another test's root is
// refused by its bootstrap as unauthenticated instead of joining that job.
using LaunchJob = run::JobEnv;

// The job; root empty when no port or secret was had, and then *why says what failed.
inline LaunchJob fresh_launch_job(std::string* why) {
  LaunchJob job;
  return run::make_job_env(&job, why) ? job : LaunchJob{};
}

// The launcher variables one rank reads in zcx_comm_init_env / zcx_init_from_env.
inline void set_rank_env(int rank, int nranks, const LaunchJob& job) {
  setenv("ZCX_RANK", std::to_string(rank).c_str(), 1);
  setenv("ZCX_NRANKS", std::to_string(nranks).c_str(), 1);
  setenv("ZCX_ROOT", job.root.c_str(), 1);
  setenv("ZCX_SECRET", job.secret.c_str(), 1);
}

// A unique id on loopback (the tests never leave this machine).
inline Status loopback_id(UniqueId* id) {
  config::ScopedOverride ifname("ZCX_SOCKET_IFNAME", "lo");
  return unique_id_create(id);
}

// Runs fn(rank) on n threads and joins them.
inline void run_threads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// Forks a child running fn(); the child exits with fn's return value. Returns the pid.
inline pid_t fork_child(const std::function<int()>& fn) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  return pid;
}

// Waits for a child at most timeout_ms, then kills it. Returns its exit code, or 128+signal;
// 255 when killed at the deadline or when there is no child (pid <= 0: the fork failed, and
// kill(-1) would signal every process the test may).
inline int wait_child(pid_t pid, int timeout_ms) {
  if (pid <= 0) return 255;
  for (int waited = 0;; waited += 10) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (waited >= timeout_ms) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return 255;
    }
    usleep(10000);
  }
}

}  // namespace zcx::test
