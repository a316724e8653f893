// Forked ranks for the multi-process provider tests and benches (shm, cuda_ipc): each child
// runs fn(rank) and exits with its value (0 = pass).
#pragma once

#include "common/clock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <vector>

namespace zcx::test {

// Forks n ranks and waits up to `ms` in all; at the deadline kills those still running.
// Returns how many ranks failed. Where a fork fails, the ranks already started are killed
// (they would wait for the missing one) and all n count as failed. Only pids > 0 are ever
// signalled: kill(-1) would reach every process the test may signal (as root, all).
inline int fork_ranks(int n, const std::function<int(int)>& fn, int ms) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(fn(r));
    if (pid < 0) {
      std::perror("fork_ranks: fork");
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      return n;
    }
    pids.push_back(pid);
  }
  int failed = 0;
  Deadline dl = Deadline::after_ms(ms);
  for (int r = 0; r < n; ++r) {
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pids[r], &status, WNOHANG)) == 0 && !dl.expired()) usleep(1000);
    if (got == 0) {  // the deadline: this rank and every later one still running are killed
      for (int k = r; k < n; ++k) kill(pids[k], SIGKILL);
      waitpid(pids[r], &status, 0);
    }
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed;
}

}  // namespace zcx::test
