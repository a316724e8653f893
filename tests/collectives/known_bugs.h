// Probes for known collectives bugs that would crash a whole test binary, so the tests that
// hit them can skip with the reason (and run again by themselves once the bug is fixed).
// Public C API only: also used by the MPI test, which links libzcx.so.
#pragma once

#include <zcx/coll.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace zcx::test {

inline constexpr const char* kReduceSigillBug =
    "known bug: the first reduction kills the process with SIGILL on a CPU without AVX-512 "
    "(collectives/reduce: Tables() calls fill_avx512_kernels() unconditionally, and GCC "
    "vectorises that table fill with AVX-512 stores under its target pragma)";

// Runs one 2-rank int32 sum allreduce in two forked processes (loopback); true when either
// dies of SIGILL. Call before MPI_Init in MPI programs.
inline bool probe_reductions_die_of_sigill() {
  zcx_unique_id_t id{};
  setenv("ZCX_SOCKET_IFNAME", "lo", 0);
  if (zcx_get_unique_id(&id) != ZCX_SUCCESS) return false;
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      setenv("ZCX_TIMEOUT", "10", 1);
      zcx_comm_t comm = nullptr;
      int32_t x[64] = {r};
      if (zcx_comm_init_rank(&comm, 2, &id, r, nullptr) != ZCX_SUCCESS) _exit(2);
      zcx_status_t st = zcx_allreduce(x, x, 64, ZCX_INT32, ZCX_SUM, comm, nullptr);
      _exit(st == ZCX_SUCCESS && zcx_comm_destroy(comm) == ZCX_SUCCESS ? 0 : 3);
    }
  }
  bool sigill = false;
  for (pid_t pid : pids) {
    int st = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid)
      sigill = sigill || (WIFSIGNALED(st) && WTERMSIG(st) == SIGILL);
  }
  return sigill;
}

inline bool reductions_die_of_sigill() {
  static const bool dies = probe_reductions_die_of_sigill();
  return dies;
}

}  // namespace zcx::test
