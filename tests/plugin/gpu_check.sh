#!/usr/bin/env bash
# GPU-machine check of the NCCL plugin with real NCCL (docs/NCCL_PLUGIN.md).
# Builds a tiny program that creates a single-rank NCCL communicator (and runs one
# allreduce) with NCCL_NET_PLUGIN pointing at libnccl-net-zcx.so, NCCL_NET=zcx and
# NCCL_DEBUG=INFO, then checks NCCL's own log lines that name zcx:
#   "NET/Plugin: Loaded net plugin zcx (v11)"  and  "Using network zcx".
# A second run loads it by name (NCCL_NET_PLUGIN=zcx, directory on LD_LIBRARY_PATH).
# Exit codes: 0 pass, 1 fail, 77 skipped (no GPU / no NCCL here).
#
# usage: tests/plugin/gpu_check.sh [path/to/libnccl-net-zcx.so]   (default build/lib/...)
set -u
SKIP=77
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
plugin=${1:-$root/build/lib/libnccl-net-zcx.so}
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d /tmp/zcx-gpu-check.XXXXXX)
trap 'rm -rf "$work"' EXIT

skip() { echo "gpu_check: SKIP: $*"; exit $SKIP; }
fail() { echo "gpu_check: FAIL: $*"; exit 1; }

command -v nvidia-smi >/dev/null 2>&1 || skip "nvidia-smi not found: no NVIDIA driver on this machine"
nvidia-smi -L >/dev/null 2>&1 || skip "nvidia-smi finds no GPU"
[ -f "$cuda/include/nccl.h" ] || skip "no nccl.h under CUDA_HOME=$cuda"
libdirs=()
for d in "$cuda/lib64" "$cuda/lib"; do [ -d "$d" ] && libdirs+=("$d"); done
have_nccl=0
for d in "${libdirs[@]}"; do [ -e "$d/libnccl.so" ] && have_nccl=1; done
[ $have_nccl -eq 1 ] || skip "no libnccl.so under $cuda/lib64 or $cuda/lib"

if [ ! -f "$plugin" ]; then
  echo "gpu_check: $plugin missing; building it"
  cmake -S "$root" -B "$root/build" -G Ninja >/dev/null && ninja -C "$root/build" nccl-net-zcx \
    || fail "could not build libnccl-net-zcx.so"
fi
plugin=$(readlink -f "$plugin")

cat > "$work/one_rank.cc" <<'CC'
#include <cuda_runtime.h>
#include <nccl.h>
#include <cstdio>
int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) { printf("NO_GPU\n"); return 77; }
  int v = 0;
  ncclGetVersion(&v);
  printf("NCCL version code %d, %d GPU(s)\n", v, n);
  ncclComm_t comm;
  int dev = 0;
  ncclResult_t r = ncclCommInitAll(&comm, 1, &dev);
  if (r != ncclSuccess) { printf("ncclCommInitAll: %s\n", ncclGetErrorString(r)); return 1; }
  float* buf = nullptr;
  cudaMalloc(&buf, 1024 * sizeof(float));
  cudaMemset(buf, 0, 1024 * sizeof(float));
  r = ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, 0);
  cudaStreamSynchronize(0);
  cudaFree(buf);
  ncclCommDestroy(comm);
  if (r != ncclSuccess) { printf("ncclAllReduce: %s\n", ncclGetErrorString(r)); return 1; }
  printf("ONE_RANK_OK\n");
  return 0;
}
CC
ldflags=()
for d in "${libdirs[@]}"; do ldflags+=("-L$d" "-Wl,-rpath,$d"); done
g++ -std=c++17 -O1 -I"$cuda/include" "$work/one_rank.cc" -o "$work/one_rank" "${ldflags[@]}" \
  -lnccl -lcudart || fail "could not compile the NCCL test program"

run_case() {  # $1 label, then env assignments
  local label=$1; shift
  env "$@" NCCL_NET=zcx NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET ZCX_NET_PROVIDER=tcp \
    "$work/one_rank" > "$work/$label.log" 2>&1
  local rc=$?
  grep -E "NET/Plugin|Using network|NET/zcx|ONE_RANK|NCCL version|WARN" "$work/$label.log" | head -20
  [ $rc -eq 77 ] && skip "cudaGetDeviceCount found no GPU"
  [ $rc -eq 0 ] || { cat "$work/$label.log" | tail -30; fail "$label: program exited $rc"; }
  grep -q "NET/Plugin: Loaded net plugin zcx (v11)" "$work/$label.log" \
    || fail "$label: NCCL did not log 'NET/Plugin: Loaded net plugin zcx (v11)'"
  grep -q "Using network zcx" "$work/$label.log" || fail "$label: NCCL did not log 'Using network zcx'"
  echo "gpu_check: $label: PASS"
}

run_case full_path NCCL_NET_PLUGIN="$plugin"
run_case by_name NCCL_NET_PLUGIN=zcx LD_LIBRARY_PATH="$(dirname "$plugin"):${LD_LIBRARY_PATH:-}"
echo "gpu_check: PASS"
