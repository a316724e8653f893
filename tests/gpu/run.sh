#!/usr/bin/env bash
# The one prepared GPU check (one H200 is enough), meant to finish within 5 minutes:
#   1. configure + build only what it runs (-DZCX_WITH_CUDA=ON -DZCX_WERROR=ON), and show
#      that libzcx links neither libcuda nor libcudart
#   2. zcx-info: the CUDA devices the shim finds
#   3. zcx-gpu-bench: cuda_ipc bandwidth next to cudaMemcpy device-to-device, same run
#   3b. zcx-gpu-probe: whether making, opening or closing a CUDA IPC mapping waits for the
#      whole device while a stream is held, and whether a reused range opens with the old
#      mapping still open (the asynchronous calls depend on these; docs/ARCHITECTURE.md)
#   4. ctest -L gpu: device reduction kernels bit-identical to the CPU reference for every
#      dtype x op; cuda_ipc between 2 and 4 processes sharing the GPU, cudaMalloc, cuMem
#      (POSIX-fd) buffers, 2 MiB cuMem segments mapped back to back (expandable segments)
#      and cuMem without the fd type, 0 B..64 MiB, every byte verified; stream-ordered
#      collectives and send/recv on device buffers (coll_gpu_test), over cuda_ipc (also on
#      expandable segments) and staged, asynchronous (the default); the asynchronous calls'
#      own cases (coll_gpu_async_test); device buffers given to calls that take host memory
#      are refused (gpu_misuse_test)
#   4b. coll_gpu_test once more with ZCX_GPU_ASYNC=0 (the synchronous fallback)
#   5. zcx-perf coll allreduce --device gpu (device buffers, stream-ordered calls, every
#      result checked): 2 and 4 ranks over cuda_ipc, 2 ranks with ZCX_GPU_STAGING=1, 2 ranks
#      with ZCX_GPU_ASYNC=0; and sendrecv (a send/recv group per call), 2 ranks over cuda_ipc
# Steps 3-5 each run to their time limit and a failure is reported at the end, so one
# broken step does not hide the others' results.
# Exit codes: 0 pass, 1 fail, 77 skipped (no GPU or no toolchain here).
# Environment: BUILD_DIR (default build-gpu), JOBS (default nproc), ITERS (bench, default 20),
#   GTEST_SRC (a GoogleTest source tree, e.g. a copy of Debian's /usr/src/googletest, built
#   first where the machine has no GoogleTest package), WERROR (default ON; the GPU machine's
#   compiler may be newer than CI's, whose -Werror build is the warning gate).
set -u
SKIP=77
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -x "$cuda/bin/nvcc" ] || { n=$(command -v nvcc) && cuda=$(dirname "$(dirname "$n")"); }
start=$(date +%s)

skip() { echo "gpu/run.sh: SKIP: $*"; exit $SKIP; }
fail() { echo "gpu/run.sh: FAIL: $*"; exit 1; }
step() { echo; echo "== $* ($(( $(date +%s) - start ))s)"; }

command -v nvidia-smi >/dev/null 2>&1 || skip "nvidia-smi not found: no NVIDIA driver here"
timeout 30 nvidia-smi -L 2>/dev/null | grep -q GPU || skip "nvidia-smi finds no GPU"
[ -x "$cuda/bin/nvcc" ] || skip "no nvcc under CUDA_HOME=$cuda"
for t in cmake ninja; do command -v $t >/dev/null 2>&1 || skip "$t not installed"; done
timeout 30 nvidia-smi -L

prefix=()
if [ -n "${GTEST_SRC:-}" ]; then
  step "GoogleTest from $GTEST_SRC"
  gt=$build-gtest
  { timeout 120 cmake -S "$GTEST_SRC" -B "$gt/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$gt/install" -DBUILD_GMOCK=OFF &&
    timeout 300 cmake --build "$gt/build" -j "$jobs" && cmake --install "$gt/build"; } >"$gt.log" 2>&1 ||
    { tail -20 "$gt.log"; fail "building GoogleTest from $GTEST_SRC"; }
  prefix=(-DCMAKE_PREFIX_PATH="$gt/install")
fi

step "configure and build"
export CUDA_HOME=$cuda
timeout 300 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DZCX_WERROR="${WERROR:-ON}" "${prefix[@]}" -DZCX_WITH_TESTS=ON -DZCX_WITH_CUDA=ON -DZCX_WITH_MPI=OFF >"$build.cmake.log" 2>&1 ||
  { tail -30 "$build.cmake.log"; fail "cmake"; }
timeout -s KILL 900 cmake --build "$build" -j "$jobs" --target zcx zcx-info zcx_gpu_reduce_test \
  zcx_gpu_cuda_ipc_test zcx_gpu_coll_test zcx_gpu_coll_async_test zcx_gpu_misuse_test \
  zcx-gpu-bench zcx-gpu-probe zcx-run zcx-perf || fail "build"
if timeout 30 ldd "$build"/transport/libzcx.so | grep -E "libcuda|libcudart"; then
  fail "libzcx.so links the CUDA driver or runtime"
fi
echo "ldd libzcx.so: no libcuda, no libcudart"

failures=()
note_failure() { echo "gpu/run.sh: FAILED: $*"; failures+=("$*"); }

step "zcx-info"
timeout -s KILL 30 "$build"/tools/info/zcx-info | sed -n '1,4p;/provider cuda_ipc/,/^$/p'

# The bandwidth figure first: a later step that fails or runs long must not cost it.
step "cuda_ipc vs cudaMemcpy D2D (zcx-gpu-bench, ${ITERS:-20} iterations per size)"
timeout -s KILL 60 "$build"/tests/gpu/zcx-gpu-bench "${ITERS:-20}" || note_failure "bench (exit $?)"

step "driver facts (zcx-gpu-probe)"
timeout -s KILL 30 "$build"/tests/gpu/zcx-gpu-probe || note_failure "probe (exit $?)"

step "ctest -L gpu"
# 105 entries, each a process that initialises CUDA (about 0.5 s on the H200 of 2026-12-04).
log=$build/ctest-gpu.log
(cd "$build" && timeout -s KILL 180 ctest -L gpu -V --timeout 60 >"$log" 2>&1)
rc=$?
grep -E "Test +#|tests passed|Total Test time" "$log"
if [ $rc -ne 0 ]; then
  grep -E "Failure|FAIL |error|rank [0-9]" "$log" | head -40
  note_failure "gpu tests (exit $rc, log: $log)"
fi
if grep -q "SKIPPED \] needs" "$log"; then
  grep "SKIPPED \] needs" "$log" | head -3
  note_failure "a GPU test skipped on a GPU machine"
fi

step "coll_gpu_test with ZCX_GPU_ASYNC=0"
ZCX_GPU_ASYNC=0 timeout -s KILL 90 "$build"/tests/gpu/zcx_gpu_coll_test >"$build/coll-gpu-sync.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  grep -E "FAIL|rank [0-9]" "$build/coll-gpu-sync.log" | head -20
  note_failure "coll_gpu_test, ZCX_GPU_ASYNC=0 (exit $rc)"
fi
grep -E "^\[( +OK|  FAILED|  PASSED) " "$build/coll-gpu-sync.log"

step "zcx-perf coll allreduce and sendrecv on device buffers (--device gpu, 16 B..256 MiB)"
# perf_gpu NP STAGING ITERS WARMUP [ASYNC [OP]]: one zcx-run job; zcx-run stops the ranks at
# 40 s (exit 124), timeout kills everything at 45 s. A wrong element fails the run (exit 1).
perf_gpu() {
  local np=$1 mode=cuda_ipc envs=(-u ZCX_GPU_STAGING) op=${6:-allreduce}
  [ "$2" = 1 ] && mode=staging envs=(ZCX_GPU_STAGING=1)
  [ "${5:-1}" = 0 ] && mode=$mode-sync envs+=(ZCX_GPU_ASYNC=0)
  echo "-- $op, $np ranks, $mode"
  timeout -s KILL 45 env "${envs[@]}" "$build"/tools/run/zcx-run -np "$np" \
    --timeout 40 -- "$build"/tools/perf/zcx-perf coll "$op" --device gpu -b 16 -e 256M \
    -f 4 -n "$3" -w "$4" --reps 3 --json "$build/perf-gpu-$op-$mode-np$np.json" ||
    note_failure "zcx-perf coll $op --device gpu, $np ranks, $mode (exit $?)"
}
perf_gpu 2 0 10 2
perf_gpu 4 0 10 2
perf_gpu 2 1 5 1
perf_gpu 2 0 10 2 0
perf_gpu 2 0 10 2 1 sendrecv

step "done"
[ ${#failures[@]} -eq 0 ] || { printf 'gpu/run.sh: FAIL: %s\n' "${failures[@]}"; exit 1; }
echo "gpu/run.sh: all GPU checks passed"
