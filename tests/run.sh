#!/usr/bin/env bash
# Runs every zcx test on a fresh Debian 12 VM: installs dependencies (idempotent),
# configures with warnings as errors, builds, and runs ctest.
#   tests/run.sh                 all tests
#   tests/run.sh -L unit         only a label (extra arguments go to ctest)
# Environment: BUILD_DIR (default build), JOBS (default nproc): compile jobs, and tests run
# at once (many multi-process tests wait out timeouts rather than use the CPU; the QEMU
# guest's tests take turns through a ctest RESOURCE_LOCK).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh test

build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
# Line tables only (-g1): enough for a failing test's backtrace, and the build takes a
# quarter less time than with full debug info (configure a build of your own for gdb).
opt="-O2 -g1 -DNDEBUG"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZCX_WERROR=ON \
  -DZCX_WITH_TESTS=ON "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$opt" \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt"
cmake --build "$build" -j "$jobs"

# Each test has its own TIMEOUT; the outer bound catches anything that slips through.
cd "$build"
timeout -s KILL 4500 ctest --output-on-failure --timeout 900 -j "$jobs" "$@"
