#!/usr/bin/env bash
# Quick start on a fresh Debian 12 VM: installs dependencies, builds zcx (Release), and runs
# the main job: a local multi-rank allreduce benchmark, printed as a table (median, min,
# max), then the same sweep in Open MPI, Gloo and memcpy, side by side with zcx
# (tools/perf/sweep_compare.sh).
#   tools/quickstart.sh             build and run
#   BUILD_DIR=... JOBS=... NP=...   override the build folder, parallel jobs, ranks
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh bench  # test, plus Gloo for its column

build=${BUILD_DIR:-build-release}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZCX_WITH_TESTS=OFF
cmake --build "$build" -j "$jobs"

bin="$build/tools"
"$bin/info/zcx-info" | head -n 20
echo
# nccl-tests' all_reduce_perf columns (median of 3 reps, busbw min and max), every result
# checked; then the peers over the same sizes. Under a minute with 4 ranks on a 2-core VM.
tools/perf/sweep_compare.sh --build "$build" --np "${NP:-4}" -b 8 -e 16M -f 8 -n 10 -w 2 --reps 3
