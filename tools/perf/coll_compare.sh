#!/usr/bin/env bash
# coll_compare.sh: zcx's float32 sum allreduce (zcx-perf coll, under zcx-run) against Open MPI
# 4.1 (pml ob1 with the vader/tcp BTL, and pml ucx) and Gloo's ring allreduce over TCP, in one
# run on this host, same sizes and method (nccl-tests'): per size -w warm-up iterations, then
# --reps repetitions of -n iterations; a repetition's time per iteration = elapsed / n,
# averaged over the ranks (nccl-tests' -a 1); busbw = size / time * 2(n-1)/n, GB/s = 1e9 B/s;
# each cell is the median (min-max) over the repetitions, out-of-place.
# Rows (the targets of issue 4; "Open MPI" = the faster of its two pmls in this run):
#   shm-8B    2 ranks shm   8 B     latency (time per allreduce) <= 0.2 us
#   shm-2M    2 ranks shm   2 MiB   busbw >= 1.5 x Open MPI
#   shm-32M   2 ranks shm   32 MiB  busbw >= 6 GB/s
#   shm-256M  2 ranks shm   256 MiB busbw >= 6 GB/s
#   tcp-256M  2 ranks tcp   256 MiB busbw >= 2 x Gloo (Open MPI there: ob1+tcp, ucx over tcp)
#   shm4-64M  4 ranks shm   64 MiB  busbw >= 2 x Open MPI (4 ranks oversubscribe a 2-core VM)
# Gloo always runs over TCP on lo; on shm rows it is a reference, not a target.
#
# usage: tools/perf/coll_compare.sh [--build DIR] [--reps R] [--rows ID,ID] [--logs DIR]
#   --build DIR   the zcx build folder with tools/run/zcx-run and tools/perf/zcx-perf
#                 (default: ./build); ZCX_RUN / ZCX_PERF override the two paths
#   --reps R      repetitions per measurement (default 5)
#   --rows LIST   only these rows (ids above, comma separated; default: all)
#   --logs DIR    keep every program's output there (default: a temporary folder, removed)
#   --near LO-HI  measure each system only while a cache line bounced between CPUs 0 and 1
#                 (tools/perf/line_bounce.c) takes LO to HI ns one-way, e.g. 40-150: two
#                 cores that share a cache. Waits up to --near-wait seconds (default 300) for
#                 that before a measurement and measures again (at most twice) when the
#                 placement moved during it. Without --near, every system is measured once,
#                 wherever it lands.
# On a VM the hypervisor moves the two vCPUs, for seconds to minutes at a time. On this
# project's 2-CPU VM the line takes 45-80 ns when they are two cores that share a cache,
# 250-350 ns when they do not, and 20-30 ns when they are the two threads of one core. What
# moves data between the ranks' caches slows with distance: zcx's 32 MiB allreduce ran at
# 6.1-6.6 GB/s near and 1.9-3.0 far, a bare loopback TCP ping-pong took 4.1 and 6.1 us;
# Open MPI's ob1 at 32 MiB stayed at 1.3-1.5 either way. Two threads of one core share its
# caches and its memory bandwidth. So each cell's placement is printed (line one-way ns
# before/after), and only cells measured in the same placement compare.
# Everything runs at normal priority: unlike shm_compare.sh there is no RT="chrt -f" option,
# because Open MPI's pml ucx ranks under SCHED_FIFO spun for minutes on this 2-CPU VM (their
# helper threads starved) and held both CPUs away from everyone else.
# Needs mpicc/mpirun (openmpi-bin, libopenmpi-dev) and, for the Gloo column, g++ and
# libgloo-dev (tools/install-deps.sh bench). Prints a markdown table for docs/PERFORMANCE.md.
# Exit code 0 when every target is met, 1 when one is missed, 2 when something could not run.
set -u -o pipefail

build=build
reps=5
only=""
logs=""
near=""
near_wait=300
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --rows) only=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --near) near=$2; shift 2 ;;
    --near-wait) near_wait=$2; shift 2 ;;
    -h|--help) sed -n '2,42p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "coll_compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
source "$here/placement.sh"
if [ -n "$near" ] && ! placement_range_ok "$near"; then
  echo "coll_compare.sh: --near wants LO-HI in ns, e.g. 40-150 (got '$near')" >&2; exit 2
fi
[[ $near_wait =~ ^[0-9]+$ ]] || { echo "coll_compare.sh: --near-wait wants seconds" >&2; exit 2; }

#      id        ranks provider bytes     iters warm-up metric rule  target peer
ROWS=("shm-8B    2     shm      8         1000  100     lat    le    0.2    -"
      "shm-2M    2     shm      2097152   100   10      bw     ratio 1.5    mpi"
      "shm-32M   2     shm      33554432  20    5       bw     ge    6      -"
      "shm-256M  2     shm      268435456 10    2       bw     ge    6      -"
      "tcp-256M  2     tcp      268435456 10    2       bw     ratio 2      gloo"
      "shm4-64M  4     shm      67108864  10    2       bw     ratio 2      mpi")

zcx_run=${ZCX_RUN:-$build/tools/run/zcx-run}
zcx_perf=${ZCX_PERF:-$build/tools/perf/zcx-perf}
missing=()
[ -x "$zcx_run" ] || missing+=("$zcx_run (build zcx: ninja -C $build zcx-run)")
[ -x "$zcx_perf" ] || missing+=("$zcx_perf (build zcx: ninja -C $build zcx-perf)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "coll_compare.sh: missing:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 2
fi

work=$(mktemp -d /tmp/zcx-coll-compare.XXXXXX)
trap 'rm -rf "$work"' EXIT
out=${logs:-$work}
mkdir -p "$out" || exit 2
source "$here/peers.sh"
peers_build "$work"
[ -n "$PEERS_MPI" ] || { echo "coll_compare.sh: $PEERS_MPI_WHY" >&2; exit 2; }
placement_build "$work" || { echo "coll_compare.sh: cc failed" >&2; exit 2; }
have_gloo=0
[ -n "$PEERS_GLOO" ] && have_gloo=1 || echo "# $PEERS_GLOO_WHY: Gloo column left out" >&2

export ZCX_TIMEOUT=${ZCX_TIMEOUT:-120}  # a stuck run fails in minutes

# Each runner: $1 ranks, $2 provider (shm|tcp), $3 bytes, $4 iters, $5 warm-up, $6 output.
# The tcp row turns the shared lane off: it carries the allreduces of ranks on one host
# through shared memory whatever ZCX_PROVIDERS says, and that row measures the tcp provider.
run_zcx() {
  local lane=1
  [ "$2" = tcp ] && lane=0
  ZCX_COLL_SHARED_LANE=$lane "$zcx_run" -np "$1" --timeout 900 -- "$zcx_perf" coll allreduce \
    -d float -o sum -b "$3" -e "$3" -n "$4" -w "$5" --reps "$reps" --provider "$2" \
    --json "$6.json" > "$6" 2>&1
}
mpi_args() { echo -b "$3" -e "$3" -n "$4" -w "$5" --reps "$reps"; }
run_ob1() { peer_run ob1 "$1" "$2" "$6" $(mpi_args "$@"); }
run_ucx() { peer_run ucx "$1" "$2" "$6" $(mpi_args "$@"); }
run_gloo() { peer_run gloo "$1" "$2" "$6" $(mpi_args "$@"); }

# "median min max wrong" of the metric (lat: time_us, bw: busbw_GBps) in the last of the
# rows on stdin (peer_rows, zcx_rows), or nothing.
stats_of() {  # $1 metric
  tail -1 | awk -v m="$1" '{ if (m == "lat") print $2, $3, $4, $8; else print $5, $6, $7, $8 }'
}

# Runs one system's measurement of a row; PLACE[row,system] = "before/after" line ns.
measure() {  # $1 row id, $2 system, $3.. the runner's arguments
  local id=$1 sys=$2 before after try tries=1
  shift 2
  [ -n "$near" ] && tries=3
  for try in $(seq $tries); do
    if [ -n "$near" ]; then
      before=$(placement_await "$near" "$near_wait") ||
        echo "# $id: $sys: CPUs not near within ${near_wait}s (line $before ns); measuring anyway" >&2
    else
      before=$(placement_ns)
    fi
    "run_$sys" "$@" || return 1
    after=$(placement_ns)
    PLACE[$id,$sys]="$before/$after"
    [ -z "$near" ] || placement_in "$near" "$after" && return 0
    [ "$try" -lt $tries ] && echo "# $id: $sys: the placement moved during the run (line $before -> $after ns); again" >&2
  done
  return 0
}

declare -A RES  # RES[row,system] = "median min max wrong" (empty: failed or not run)
declare -A PLACE
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# coll_compare.sh on $(hostname), $(nproc) cores, load average $load_before, reps $reps" >&2
for spec in "${ROWS[@]}"; do
  read -r id np prov bytes iters warm metric rule target peer <<< "$spec"
  [ -n "$only" ] && [[ ",$only," != *",$id,"* ]] && continue
  for sys in zcx ob1 ucx gloo; do
    [ $sys = gloo ] && [ $have_gloo = 0 ] && continue
    echo "# $id: $sys ..." >&2
    f="$out/$id.$sys"
    if ! measure "$id" "$sys" "$np" "$prov" "$bytes" "$iters" "$warm" "$f"; then
      echo "# $id: $sys failed; its output ends:" >&2
      tail -5 "$f" >&2
    fi
    if [ $sys = zcx ]; then RES[$id,$sys]=$(zcx_rows "$f.json" | stats_of "$metric")
    else RES[$id,$sys]=$(peer_rows "$f" | stats_of "$metric"); fi
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cell() {  # $1 "median min max wrong", $2 metric
  [ -z "$1" ] && { echo "failed"; return; }
  awk -v m="$2" '{ f = (m == "lat") ? "%.3f (%.3f-%.3f)" : "%.2f (%.2f-%.2f)";
                   s = sprintf(f, $1, $2, $3); if ($4 > 0) s = s " WRONG " $4; print s }' <<< "$1"
}
med() { awk '{print $1}' <<< "$1"; }
# The better Open MPI median: lower time for lat, higher busbw for bw.
best_mpi() {  # $1 row id, $2 metric
  local a b
  a=$(med "${RES[$1,ob1]:-}"); b=$(med "${RES[$1,ucx]:-}")
  awk -v a="$a" -v b="$b" -v m="$2" 'BEGIN {
    if (a == "") { print b; exit } if (b == "") { print a; exit }
    print (m == "lat") ? (a < b ? a : b) : (a > b ? a : b) }'
}
# "ratio verdict" for one row.
judge() {  # $1 row id, $2 metric, $3 rule, $4 target, $5 peer
  local z p wrong
  z=$(med "${RES[$1,zcx]:-}")
  wrong=$(awk '{print $4}' <<< "${RES[$1,zcx]:-}")
  if [ "$5" = gloo ]; then p=$(med "${RES[$1,gloo]:-}"); else p=$(best_mpi "$1" "$2"); fi
  awk -v z="$z" -v p="$p" -v r="$3" -v t="$4" -v w="$wrong" 'BEGIN {
    ratio = (z != "" && p != "" && p > 0) ? sprintf("%.2f", z / p) : "-"
    if (z == "") ok = "not run"
    else if (w > 0) ok = "NOT MET (wrong results)"
    else if (r == "le") ok = (z <= t) ? "met" : "NOT MET"
    else if (r == "ge") ok = (z >= t) ? "met" : "NOT MET"
    else if (ratio == "-") ok = "no peer"
    else ok = (z >= t * p) ? "met" : "NOT MET"
    print ratio "|" ok }'
}
size_text() { awk -v b="$1" 'BEGIN { print (b >= 1048576 && b % 1048576 == 0) ? b / 1048576 " MiB" : b " B" }'; }
target_text() {  # $1 rule, $2 target, $3 peer, $4 metric
  case $1 in
    le) echo "<= $2 us" ;;
    ge) echo ">= $2 GB/s" ;;
    ratio) [ "$3" = gloo ] && echo ">= $2 x Gloo" || echo ">= $2 x Open MPI" ;;
  esac
}

status=0
echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) CPUs" \
     "($(lscpu | sed -n 's/^Model name: *//p')), load average before: $load_before," \
     "after: $load_after; reps $reps; Open MPI $(mpirun --version 2>/dev/null | head -1 |
     awk '{print $NF}')"
echo
echo "| row | ranks | transport | size | metric | zcx | Open MPI ob1 | Open MPI ucx | Gloo ring (tcp) | zcx / peer | target | result | CPU line ns |"
echo "|---|---:|---|---:|---|---|---|---|---|---:|---|---|---|"
for spec in "${ROWS[@]}"; do
  read -r id np prov bytes iters warm metric rule target peer <<< "$spec"
  [ -n "$only" ] && [[ ",$only," != *",$id,"* ]] && continue
  IFS='|' read -r ratio verdict <<< "$(judge "$id" "$metric" "$rule" "$target" "$peer")"
  [ "$verdict" = met ] || status=1
  unit="busbw GB/s"; [ "$metric" = lat ] && unit="time us"
  gloo_cell="-"; [ $have_gloo = 1 ] && gloo_cell=$(cell "${RES[$id,gloo]:-}" "$metric")
  place="${PLACE[$id,zcx]:--} ${PLACE[$id,ob1]:--} ${PLACE[$id,ucx]:--}"
  [ $have_gloo = 1 ] && place+=" ${PLACE[$id,gloo]:--}"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$id" "$np" "$prov" \
    "$(size_text "$bytes")" "$unit" "$(cell "${RES[$id,zcx]:-}" "$metric")" \
    "$(cell "${RES[$id,ob1]:-}" "$metric")" "$(cell "${RES[$id,ucx]:-}" "$metric")" \
    "$gloo_cell" "$ratio" "$(target_text "$rule" "$target" "$peer" "$metric")" "$verdict" "$place"
done
echo
echo "Cells: median (min-max) over $reps repetitions, out-of-place, time averaged over the ranks."
echo "zcx / peer: zcx median over the peer's (Gloo on tcp-256M, otherwise the faster Open MPI pml;"
echo "for the latency row a time ratio, lower is better). ob1 uses the vader BTL on shm rows and"
echo "the tcp BTL on tcp-256M; pml ucx its shared-memory transports, or UCX_TLS=tcp,self on tcp-256M."
echo "CPU line ns: one-way time of a cache line bounced between CPUs 0 and 1 before/after each"
echo "system's measurement (zcx, ob1, ucx[, gloo]): where the hypervisor placed the two vCPUs."
[ -n "$near" ] && echo "Measured with --near $near: each system waited for a line time of $near ns."
exit $status
