// Helpers for the GPU tests. They compile in every CUDA-enabled build and skip, with the
// reason printed, where no GPU (or no driver) exists.
//
// The probe runs in a forked child: initialising CUDA in the test process before it forks
// its ranks would leave the children with an unusable driver state.
#pragma once

#include "common/clock.h"
#include "common/dl/cuda_shim.h"
#include "common/fork_shared.h"
#include "common/simulated_cuda.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

namespace zcx::gpu_test {

struct Probe {
  int ndev = 0;
  char why[256] = {};
};

// Devices a child process sees through the CUDA shim, and why there are none.
inline Probe probe_gpus() {
  test::ForkShared<Probe> shared;
  if (!shared.ok()) return Probe{0, "mmap for the GPU probe failed"};
  pid_t pid = fork();
  if (pid == 0) {
    std::string why;
    shared->ndev = cuda_device_count(&why);
    std::snprintf(shared->why, sizeof shared->why, "%s", why.c_str());
    _exit(0);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  Probe out = *shared.get();
  if (pid < 0) std::snprintf(out.why, sizeof out.why, "fork for the GPU probe failed");
  return out;
}

// A counter the simulated runtime exports for tests (tests/gpu/fake_cuda), or null against a
// real CUDA runtime.
using FakeCounter = long (*)();
inline FakeCounter fake_counter(const char* name) {
  return test::simulated_cuda_symbol<FakeCounter>(name);
}

// Cached per test binary.
inline const Probe& gpus() {
  static const Probe probe = probe_gpus();
  return probe;
}

}  // namespace zcx::gpu_test

// Skips the current test when fewer than `n` GPUs are visible, printing why.
#define ZCX_REQUIRE_GPUS(n)                                                              \
  do {                                                                                   \
    const auto& zcx_probe_ = ::zcx::gpu_test::gpus();                                    \
    if (zcx_probe_.ndev < (n)) {                                                         \
      std::printf("[  SKIPPED ] needs %d CUDA device(s), found %d: %s\n", (n),           \
                  zcx_probe_.ndev, zcx_probe_.why);                                      \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " << zcx_probe_.ndev    \
                   << ": " << zcx_probe_.why;                                            \
    }                                                                                    \
  } while (0)
