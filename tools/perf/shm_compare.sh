#!/usr/bin/env bash
# Compares the zcx shm provider with Open MPI's vader BTL (with and without CMA) and with
# UCX's shared-memory transports (posix, sysv, posix+cma) in one run, on this machine.
# Prints a markdown table (medians over REPS runs) for docs/PERFORMANCE.md.
#
#   tools/perf/shm_compare.sh [build-dir]        (default: build; REPS=5 by default)
#
# Method, the same for every system: ranks pinned to CPUs 0 and 1; latency = ping-pong
# round trip / 2 (average); bandwidth = windows of 64 back-to-back non-blocking sends plus
# an ack (osu_bw style) for zcx and MPI, ucx_perftest tag_bw (its default) for UCX.
# GB/s = 1e9 bytes/s. Needs: mpicc/mpirun (Open MPI), ucx_perftest.
set -euo pipefail
BUILD=${1:-build}
REPS=${REPS:-5}
BENCH=$BUILD/tests/transport/shm/zcx-shm-bench
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[[ -x $BENCH ]] || { echo "build $BENCH first: ninja -C $BUILD zcx-shm-bench" >&2; exit 2; }
mpicc -O2 -o "$TMP/mpi-pp" "$(dirname "$0")/shm_mpi_pingpong.c"

LAT_SIZES=(8 4096)
BW_SIZES=(65536 1048576 67108864)
PORT=$((20000 + RANDOM % 20000))

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "n/a"; else printf "%.3f", (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }

zcx() {  # zcx <lat|bw> <size> [env...]
  local t=$1 s=$2; shift 2
  env "$@" "$BENCH" -t "$t" -s "$s" | awk '!/^#/ {print $2}'
}
mpi() {  # mpi <lat|bw> <size> <none|cma>
  mpirun --allow-run-as-root -np 2 --bind-to core --mca btl vader,self \
    --mca btl_vader_single_copy_mechanism "$3" "$TMP/mpi-pp" -t "$1" -s "$2" 2>/dev/null |
    awk '!/^#/ {print $2}'
}
ucx() {  # ucx <lat|bw> <size> <UCX_TLS>
  local test=tag_lat iters=100000
  [[ $1 == bw ]] && test=tag_bw && iters=$(( $2 >= 16777216 ? 40 : 2000 ))
  [[ $1 == lat && $2 -gt 65536 ]] && iters=2000
  PORT=$((PORT + 1))
  UCX_TLS=$3 timeout 120 ucx_perftest -p $PORT -c 1 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  UCX_TLS=$3 timeout 120 ucx_perftest localhost -p $PORT -c 0 -t $test -s "$2" -n $iters 2>/dev/null |
    awk -v t="$1" '/^Final:/ { if (t == "lat") print $5; else printf "%.3f\n", $7 * 1048576 / 1e9 }'
  wait $srv 2>/dev/null || true
}

declare -A RES
run_system() {  # name, then a function call prefix that takes <lat|bw> <size>
  local name=$1; shift
  for s in "${LAT_SIZES[@]}"; do
    RES[$name,lat,$s]=$(for r in $(seq "$REPS"); do "$@" lat "$s"; done | median)
  done
  for s in "${BW_SIZES[@]}"; do
    RES[$name,bw,$s]=$(for r in $(seq "$REPS"); do "$@" bw "$s"; done | median)
  done
}
zcx_auto() { zcx "$1" "$2"; }
zcx_pipe() { zcx "$1" "$2" ZCX_SHM_LARGE=pipeline; }
zcx_cma() { zcx "$1" "$2" ZCX_SHM_LARGE=cma; }
mpi_none() { mpi "$1" "$2" none; }
mpi_cma() { mpi "$1" "$2" cma; }
ucx_posix() { ucx "$1" "$2" posix,self; }
ucx_sysv() { ucx "$1" "$2" sysv,self; }
ucx_cma() { ucx "$1" "$2" posix,cma,self; }

SYSTEMS=("zcx shm (default)" "zcx shm ZCX_SHM_LARGE=cma" "Open MPI vader, no CMA"
         "Open MPI vader + CMA" "UCX posix" "UCX sysv" "UCX posix+cma")
FUNCS=(zcx_auto zcx_cma mpi_none mpi_cma ucx_posix ucx_sysv ucx_cma)
for i in "${!SYSTEMS[@]}"; do
  echo "measuring ${SYSTEMS[$i]} ..." >&2
  run_system "${SYSTEMS[$i]}" "${FUNCS[$i]}"
done

echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')),"\
     "load average before: $(cut -d' ' -f1-3 /proc/loadavg), REPS=$REPS (medians)"
echo
printf '| system | 8 B lat (us) | 4 KiB lat (us) | 64 KiB bw (GB/s) | 1 MiB bw (GB/s) | 64 MiB bw (GB/s) |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
for n in "${SYSTEMS[@]}"; do
  printf '| %s | %s | %s | %s | %s | %s |\n' "$n" "${RES[$n,lat,8]}" "${RES[$n,lat,4096]}" \
    "${RES[$n,bw,65536]}" "${RES[$n,bw,1048576]}" "${RES[$n,bw,67108864]}"
done
