#!/usr/bin/env bash
# Builds zcx and its tests with AddressSanitizer and UndefinedBehaviorSanitizer and runs
# them: any invalid memory access, leak or undefined behaviour fails the test that hit it.
#   tests/sanitize.sh              every label but rdma (its QEMU guest runs no sanitizer)
#   tests/sanitize.sh -L faults    one label (extra arguments go to ctest)
# Environment: BUILD_DIR (default build-asan), JOBS (default nproc).
# CUDA, UCX and MPI are left out: their runtimes' own allocations would read as leaks. No
# -Werror: GCC 12 warns falsely (-Wmaybe-uninitialized in std::function) under -fsanitize.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh test

build=${BUILD_DIR:-build-asan}
jobs=${JOBS:-$(nproc)}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DZCX_WERROR=OFF -DZCX_WITH_TESTS=ON \
  -DZCX_WITH_CUDA=OFF -DZCX_WITH_UCX=OFF -DZCX_WITH_MPI=OFF \
  "-DCMAKE_C_FLAGS=$san" "-DCMAKE_CXX_FLAGS=$san" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
  "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined"
cmake --build "$build" -j "$jobs"

cd "$build"
export UBSAN_OPTIONS=print_stacktrace=1
# The plugin tests dlclose the plugin: LeakSanitizer then reports what the sanitizer and C++
# runtimes allocated for it (the same tests with the plugin kept loaded report nothing), so
# leaks are checked everywhere else.
ASAN_OPTIONS=detect_leaks=1 timeout -s KILL 4500 ctest --output-on-failure --timeout 900 \
  -LE 'rdma|plugin' "$@"
ASAN_OPTIONS=detect_leaks=0 timeout -s KILL 1800 ctest --output-on-failure --timeout 900 \
  -L plugin "$@"
