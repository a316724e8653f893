#!/usr/bin/env bash
# Builds zcx and its tests with AddressSanitizer and UndefinedBehaviorSanitizer and runs
# them: any invalid memory access, leak or undefined behaviour fails the test that hit it.
#   tests/sanitize.sh              every label but rdma (its QEMU guest runs no sanitizer)
#   tests/sanitize.sh -L faults    one label (extra arguments go to ctest)
#   SANITIZER=thread tests/sanitize.sh
#                                  ThreadSanitizer instead (build-tsan): a data race fails the
#                                  test (exit code 66). Every test: about 15 minutes on the
#                                  2-core VM; .ci/run leaves out the multi-process suites.
# Environment: BUILD_DIR (default build-asan, build-tsan), JOBS (default nproc: compile jobs
# and tests at once, as in tests/run.sh),
# SANITIZE_EXCLUDE (ThreadSanitizer only: a ctest regex of more tests to leave out),
# SANITIZE_CUDA (default AUTO: built where nvcc is; OFF on a machine with a CUDA driver).
# CUDA code is built so that its tests run against the simulated runtime (tests/gpu/fake_cuda)
# under the sanitizer; a real driver's own allocations and threads would read as leaks and
# races. UCX and MPI are left out for the same reason. No -Werror: GCC 12 warns falsely
# (-Wmaybe-uninitialized in std::function) under -fsanitize.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh test

jobs=${JOBS:-$(nproc)}
tsan=0
if [ "${SANITIZER:-address}" = thread ]; then tsan=1; fi
if [ $tsan = 1 ]; then
  build=${BUILD_DIR:-build-tsan}
  san="-fsanitize=thread -fno-omit-frame-pointer -O1"
  link=-fsanitize=thread
else
  build=${BUILD_DIR:-build-asan}
  san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1"
  link=-fsanitize=address,undefined
fi
# -g1: line tables, all that the sanitizers' stack traces need; full debug info made the
# build a third slower.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DZCX_WERROR=OFF -DZCX_WITH_TESTS=ON \
  "-DZCX_WITH_CUDA=${SANITIZE_CUDA:-AUTO}" -DZCX_WITH_UCX=OFF -DZCX_WITH_MPI=OFF \
  "-DCMAKE_C_FLAGS=$san" "-DCMAKE_CXX_FLAGS=$san" -DCMAKE_C_FLAGS_DEBUG=-g1 \
  -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  "-DCMAKE_EXE_LINKER_FLAGS=$link" "-DCMAKE_SHARED_LINKER_FLAGS=$link"
cmake --build "$build" -j "$jobs"

cd "$build"
if [ $tsan = 1 ]; then
  # die_after_fork=0: the tests fork ranks from processes that have threads. Left out: ShmCut
  # measures copy speeds to pick a chunk cut, which the sanitizer's slowdown changes; the
  # simulated runtime's "heavy" entries (the 4-rank collective and cuda_ipc runs) take over a
  # minute each here and come near their deadlines, and the bandwidth program runs a path the
  # 2-rank cuda_ipc entry already covers.
  skip="^ShmCut\\.|_heavy_simulated\$|^zcx_gpu_bench_simulated\$"
  TSAN_OPTIONS="halt_on_error=0 die_after_fork=0 second_deadlock_stack=1 exitcode=66" \
    timeout -s KILL 4500 ctest --output-on-failure --timeout 900 -j "$jobs" -LE rdma \
    -E "$skip${SANITIZE_EXCLUDE:+|$SANITIZE_EXCLUDE}" "$@"
  exit
fi
export UBSAN_OPTIONS=print_stacktrace=1
# The plugin tests dlclose the plugin: LeakSanitizer then reports what the sanitizer and C++
# runtimes allocated for it (the same tests with the plugin kept loaded report nothing), so
# leaks are checked everywhere else.
ASAN_OPTIONS=detect_leaks=1 timeout -s KILL 4500 ctest --output-on-failure --timeout 900 \
  -j "$jobs" -LE 'rdma|plugin' "$@"
ASAN_OPTIONS=detect_leaks=0 timeout -s KILL 1800 ctest --output-on-failure --timeout 900 \
  -j "$jobs" -L plugin "$@"
