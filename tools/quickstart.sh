#!/usr/bin/env bash
# Quick start on a fresh Debian 12 VM: installs dependencies, builds zcx (Release), and runs
# the main job: a local multi-rank benchmark, printed as a table (median, min, max).
#   tools/quickstart.sh             build and run
#   BUILD_DIR=... JOBS=... NP=...   override the build folder, parallel jobs, ranks
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh test

build=${BUILD_DIR:-build-release}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZCX_WITH_TESTS=OFF
cmake --build "$build" -j "$jobs"

bin="$build/tools"
"$bin/info/zcx-info" | head -n 20
echo
# nccl-tests' all_reduce_perf columns (median of 3 reps, busbw min and max), every result
# checked; sized to finish in well under 2 minutes with 4 ranks on a 2-core VM.
echo "== allreduce, float32 sum, ${NP:-4} local ranks (zcx-perf coll) =="
"$bin/run/zcx-run" -np "${NP:-4}" --timeout 600 -- \
  "$bin/perf/zcx-perf" coll allreduce -b 8 -e 16M -f 8 -n 10 -w 2 --reps 3
