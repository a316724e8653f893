#!/usr/bin/env bash
# Compares the zcx shm provider with Open MPI's vader BTL (with and without CMA) and with
# UCX's shared-memory transports (posix, sysv, posix+cma) in one run, on this machine.
# Prints a markdown table (median (min-max) over REPS runs) for docs/PERFORMANCE.md, then
# zcx's ratio to the best peer at each target size.
#
#   tools/perf/shm_compare.sh [build-dir]        (default: build; REPS=5 by default)
#   RT="chrt -f 10" REPS=5 tools/perf/shm_compare.sh build     (on a busy shared machine)
#   NEAR=40-150 tools/perf/shm_compare.sh build   (each measurement waits for two CPUs that
#                                                   share a cache, and is taken again, at most
#                                                   twice, when they moved apart during it:
#                                                   placement_measure in placement.sh)
#
# Method, the same for every system: ranks pinned to CPUs 0 and 1; latency = ping-pong
# round trip / 2 (average); bandwidth = windows of 64 back-to-back non-blocking sends plus
# an ack (osu_bw style) for zcx and MPI, ucx_perftest tag_bw (its default) for UCX.
# GB/s = 1e9 bytes/s. Needs: mpicc/mpirun (Open MPI), ucx_perftest.
set -euo pipefail
BUILD=${1:-build}
REPS=${REPS:-5}
# RT="chrt -f 10" runs every benchmark process at real-time priority, which shields the
# numbers from other jobs' CPU time on a shared VM (not from their cache/memory traffic).
RT=${RT:-}
BENCH=$BUILD/tests/transport/shm/zcx-shm-bench
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[[ -x $BENCH ]] || { echo "build $BENCH first: ninja -C $BUILD zcx-shm-bench" >&2; exit 2; }
mpicc -O2 -o "$TMP/mpi-pp" "$(dirname "$0")/shm_mpi_pingpong.c"

LAT_SIZES=(8 4096)
BW_SIZES=(65536 1048576 67108864)
PORT=$((20000 + RANDOM % 20000))

# "median (min-max)" of the numbers on stdin, one per line.
median() {
  sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "n/a"; exit}
    printf "%.3f (%.3f-%.3f)", (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2, v[1], v[NR]}'
}

# bw1 = bandwidth with one message in flight (each message streams through memory on its
# own; with a window of messages sharing one buffer, an implementation that interleaves
# fragments of concurrent messages re-reads and re-writes the same lines from cache).
flags() { case $1 in lat) echo "-t lat" ;; bw) echo "-t bw" ;; bw1) echo "-t bw -w 1 -n 40" ;; esac; }
zcx() {  # zcx <lat|bw|bw1> <size> [env...]
  local t=$1 s=$2; shift 2
  env "$@" $RT "$BENCH" $(flags "$t") -s "$s" | awk '!/^#/ {print $2}'
}
mpi() {  # mpi <lat|bw> <size> <none|cma>
  $RT mpirun --allow-run-as-root -np 2 --bind-to core --mca btl vader,self \
    --mca btl_vader_single_copy_mechanism "$3" "$TMP/mpi-pp" $(flags "$1") -s "$2" 2>/dev/null |
    awk '!/^#/ {print $2}'
}
ucx() {  # ucx <lat|bw> <size> <UCX_TLS>
  local test=tag_lat iters=100000 extra=""
  [[ $1 == bw* ]] && test=tag_bw && iters=$(( $2 >= 16777216 ? 40 : 2000 ))
  [[ $1 == bw1 ]] && extra="-O 1"
  [[ $1 == lat && $2 -gt 65536 ]] && iters=2000
  PORT=$((PORT + 1))
  UCX_TLS=$3 $RT timeout 120 ucx_perftest -p $PORT -c 1 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  UCX_TLS=$3 $RT timeout 120 ucx_perftest localhost -p $PORT -c 0 -t $test -s "$2" -n $iters $extra 2>/dev/null |
    awk -v t="$1" '/^Final:/ { if (t == "lat") print $5; else printf "%.3f\n", $7 * 1048576 / 1e9 }'
  wait $srv 2>/dev/null || true
}

# The hardware floor: one cache line bounced between two pinned processes (no library). The
# same probe reads where the hypervisor placed the two vCPUs before and after each system's
# measurements (see tools/perf/coll_compare.sh, --near): with NEAR=LO-HI each system waits,
# up to NEAR_WAIT seconds (default 300), for a one-way line time of LO to HI ns first, and
# each single measurement waits again (up to NEAR_WAIT, default 60 there) and is retaken
# when the vCPUs moved apart during it (placement_measure).
source "$(dirname "$0")/placement.sh"
placement_build "$TMP"
NEAR=${NEAR:-}
if [[ -n $NEAR ]] && ! placement_range_ok "$NEAR"; then
  echo "NEAR wants LO-HI in ns, e.g. 40-150 (got '$NEAR')" >&2; exit 2
fi
# The reading a system starts at (after waiting for NEAR, when set; a wait that runs out
# measures anyway, and the reading shows it).
placement_start() {
  if [[ -n $NEAR ]]; then placement_await "$NEAR" "${NEAR_WAIT:-300}" || true
  else placement_ns; fi
}

zcx_auto() { zcx "$1" "$2"; }
zcx_cma() { zcx "$1" "$2" ZCX_SHM_LARGE=cma; }
mpi_none() { mpi "$1" "$2" none; }
mpi_cma() { mpi "$1" "$2" cma; }
ucx_posix() { ucx "$1" "$2" posix,self; }
ucx_sysv() { ucx "$1" "$2" sysv,self; }
ucx_cma() { ucx "$1" "$2" posix,cma,self; }

SYSTEMS=("zcx shm (default: auto)" "zcx shm ZCX_SHM_LARGE=cma" "Open MPI vader, no CMA"
         "Open MPI vader + CMA" "UCX posix" "UCX sysv" "UCX posix+cma")
FUNCS=(zcx_auto zcx_cma mpi_none mpi_cma ucx_posix ucx_sysv ucx_cma)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# Repetitions are the outer loop, so a noisy moment on this shared VM hits every system.
declare -A VALS
for rep in $(seq "$REPS"); do
  echo "rep $rep/$REPS ..." >&2
  VALS[floor]+="$($RT "$PLACEMENT_PROBE" 1000000 | awk '{printf "%.3f", $1 / 1000}') "
  for i in "${!SYSTEMS[@]}"; do
    before=$(placement_start)
    f=${FUNCS[$i]}
    for s in "${LAT_SIZES[@]}"; do VALS[$i,lat,$s]+="$(placement_measure "$f" lat "$s") "; done
    for s in "${BW_SIZES[@]}"; do VALS[$i,bw,$s]+="$(placement_measure "$f" bw "$s") "; done
    VALS[$i,bw1]+="$(placement_measure "$f" bw1 67108864) "
    VALS[$i,place]+="$before/$(placement_ns) "
  done
done
med() { tr ' ' '\n' <<< "${VALS[$1]}" | grep -v '^$' | median; }
medv() { med "$1" | cut -d' ' -f1; }  # the median alone

echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')),"\
     "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg),"\
     "REPS=$REPS (median (min-max))${RT:+, run under '$RT'}"
echo "Hardware floor (one cache line bounced between the two CPUs, no library): $(med floor) us one-way"
echo
echo "| system | 8 B lat (us) | 4 KiB lat (us) | 64 KiB bw (GB/s) | 1 MiB bw (GB/s) | 64 MiB bw (GB/s) | 64 MiB bw, 1 in flight (GB/s) | CPU line ns |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
for i in "${!SYSTEMS[@]}"; do
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "${SYSTEMS[$i]}" "$(med "$i,lat,8")" \
    "$(med "$i,lat,4096")" "$(med "$i,bw,65536")" "$(med "$i,bw,1048576")" \
    "$(med "$i,bw,67108864")" "$(med "$i,bw1")" "${VALS[$i,place]% }"
done
echo
echo "CPU line ns: one-way time of a cache line bounced between CPUs 0 and 1 before/after each"
if [[ -n $NEAR ]]; then
  echo "system's measurements, one pair per repetition; each measurement waited for $NEAR ns"
  echo "(NEAR) and was taken again when the reading after it was out of that range."
  placement_summary
else
  echo "system's measurements, one pair per repetition."
fi

# zcx (default) against the best peer's median at the issue's target sizes (latency: lower is
# better, so the ratio is peer/zcx; bandwidth: zcx/peer). Peers are systems 2 and up.
echo
for key in lat,8 bw,1048576 bw,67108864; do
  best="" who=""
  for i in "${!SYSTEMS[@]}"; do
    [[ $i -lt 2 ]] && continue
    v=$(medv "$i,$key")
    [[ $v == n/a ]] && continue
    if [[ -z $best ]] || awk -v a="$v" -v b="$best" -v k="$key" \
        'BEGIN {exit !((k ~ /^lat/) ? a < b : a > b)}'; then best=$v who=${SYSTEMS[$i]}; fi
  done
  z=$(medv "0,$key")
  awk -v z="$z" -v b="$best" -v k="$key" -v w="$who" 'BEGIN {
    r = (k ~ /^lat/) ? b / z : z / b
    printf "%s: zcx %s, best peer %s (%s): zcx %.2fx the peer\n", k, z, b, w, r }'
done
