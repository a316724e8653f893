#!/usr/bin/env bash
# sweep_compare.sh: the quickstart's main job. zcx's float32 sum allreduce over a sweep of
# sizes among NP local ranks (`zcx-perf coll` under zcx-run, its table printed as it runs),
# then the same sweep, measured the same way, in its peers: Open MPI (pml ob1 with the vader
# BTL, and pml ucx), Gloo's ring allreduce over TCP on lo (with libgloo-dev), and the copy
# rate of this host's CPUs (`zcx-perf memcpy`, every CPU copying at once); last, one table of
# them side by side.
#
# usage: tools/perf/sweep_compare.sh [--build DIR] [--np N] [-b MIN] [-e MAX] [-f F] [-n N]
#                                    [-w W] [--reps R] [--logs DIR] [--overlap US]
#   --build DIR   the zcx build folder (default ./build-release); ZCX_RUN and ZCX_PERF
#                 override the two programs' paths
#   --np N        ranks (default 4)
#   -b -e -f -n -w --reps   the sweep, as nccl-tests spells it (default -b 8 -e 16M -f 8
#                 -n 10 -w 2 --reps 3)
#   --logs DIR    keep every program's output there (default: a temporary folder, removed)
#   --overlap US  also measure the posted form (zcx_iallreduce, MPI_Iallreduce) as the OSU
#                 benchmarks do, polling every US of computation (0: never; see
#                 zcx-perf coll --help), and print a second table: zcx and Open MPI
# Each cell: median (min-max) over the repetitions, out-of-place. Below 64 KiB the table
# compares the time of one allreduce (us), from 64 KiB the bus bandwidth (GB/s, nccl-tests'
# busbw = size / time * 2(n-1)/n); "zcx vs best peer" is how many times faster zcx was than
# the fastest of Open MPI and Gloo at that size. The memcpy column is not a peer but the
# reference: one copy of that size while each CPU copies its own buffer.
# A peer that cannot be built or run here is left out, and says why.
# Exit code: 0 when zcx ran and every result it checked was right (whatever the peers did),
# 1 when zcx failed or computed a wrong result, 2 on bad usage or missing zcx programs.
set -u -o pipefail

build=build-release
np=4
sweep=(-b 8 -e 16M -f 8 -n 10 -w 2 --reps 3)
logs=""
overlap=""
usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }
set_flag() {  # replaces the value of sweep flag $1 with $2
  local i
  for i in "${!sweep[@]}"; do [ "${sweep[$i]}" = "$1" ] && sweep[$((i + 1))]=$2; done
}
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --build|--np|--logs|--overlap|-b|-e|-f|-n|-w|--reps)
      [ $# -ge 2 ] || { echo "sweep_compare.sh: $1 needs a value" >&2; exit 2; } ;;
    *) echo "sweep_compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  case "$1" in
    --build) build=$2 ;;
    --np) np=$2 ;;
    --logs) logs=$2 ;;
    --overlap) overlap=$2 ;;
    *) set_flag "$1" "$2" ;;
  esac
  shift 2
done
[[ $np =~ ^[1-9][0-9]*$ ]] || { echo "sweep_compare.sh: --np wants a count >= 1 (got '$np')" >&2; exit 2; }
[[ -z $overlap || $overlap =~ ^[0-9]+$ ]] ||
  { echo "sweep_compare.sh: --overlap wants microseconds >= 0 (got '$overlap')" >&2; exit 2; }
overlap_flag=()
[ -n "$overlap" ] && overlap_flag=(--overlap "$overlap")

zcx_run=${ZCX_RUN:-$build/tools/run/zcx-run}
zcx_perf=${ZCX_PERF:-$build/tools/perf/zcx-perf}
for p in "$zcx_run" "$zcx_perf"; do
  [ -x "$p" ] || { echo "sweep_compare.sh: $p is missing (build zcx first)" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")" && pwd)
source "$here/peers.sh"
work=$(mktemp -d /tmp/zcx-sweep-compare.XXXXXX)
trap 'rm -rf "$work"' EXIT
out=${logs:-$work}
mkdir -p "$out" || exit 2
export ZCX_TIMEOUT=${ZCX_TIMEOUT:-120} PEERS_TIMEOUT=${PEERS_TIMEOUT:-300}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# zcx first, its table shown as it runs; a failure ends the job, and so does a wrong result
# (zcx-perf checks one call per size and exits nonzero when an element differs).
echo "== allreduce, float32 sum, $np local ranks (zcx-perf coll) =="
"$zcx_run" -np "$np" --timeout 900 -- "$zcx_perf" coll allreduce -d float -o sum "${sweep[@]}" \
  "${overlap_flag[@]}" --json "$out/zcx.json" | tee "$out/zcx.txt"
zcx_rc=$?
[ $zcx_rc -eq 0 ] || { echo "sweep_compare.sh: zcx-perf coll failed (exit $zcx_rc)" >&2; exit 1; }
zcx_rows "$out/zcx.json" > "$out/zcx.rows"
zcx_overlap_rows "$out/zcx.json" > "$out/zcx.overlap"

echo
echo "== the same sweep in Open MPI, Gloo and memcpy =="
peers_build "$work"
declare -A NAME=([ob1]="Open MPI ob1" [ucx]="Open MPI ucx" [gloo]="Gloo ring (tcp)")
declare -A WHY=([ob1]=$PEERS_MPI_WHY [ucx]=$PEERS_MPI_WHY [gloo]=$PEERS_GLOO_WHY)
for sys in ob1 ucx gloo; do
  : > "$out/$sys.rows"
  : > "$out/$sys.overlap"
  if [ -n "${WHY[$sys]}" ]; then echo "# ${NAME[$sys]} left out: ${WHY[$sys]}"; continue; fi
  echo "# ${NAME[$sys]} ..."
  flags=("${sweep[@]}")
  [ $sys != gloo ] && flags+=("${overlap_flag[@]}")  # Gloo's program has no posted form
  if peer_run "$sys" "$np" shm "$out/$sys.txt" "${flags[@]}"; then
    peer_rows "$out/$sys.txt" > "$out/$sys.rows"
    peer_overlap_rows "$out/$sys.txt" > "$out/$sys.overlap"
  else
    echo "# ${NAME[$sys]} failed; its output ends:"
    tail -5 "$out/$sys.txt" | sed 's/^/#   /'
  fi
done
echo "# memcpy ..."
: > "$out/memcpy.rows"
if "$zcx_perf" memcpy "${sweep[@]}" > "$out/memcpy.txt" 2>&1; then
  # size copies iters time(med min max) GBps(med min max) all_GBps(3) wrong -> the rows' shape
  awk '$1 ~ /^[0-9]+$/ { print $1, $4, $5, $6, $7, $8, $9, $13 }' "$out/memcpy.txt" > "$out/memcpy.rows"
else
  echo "# memcpy failed: $(tail -1 "$out/memcpy.txt")"
fi
cpus=$(sed -n 's/^# cpus: //p' "$out/memcpy.txt")
echo
echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) CPUs ($(lscpu |
  sed -n 's/^Model name: *//p')), load average before: $load_before, after:" \
  "$(cut -d' ' -f1-3 /proc/loadavg); $np ranks; Open MPI $(mpirun --version 2>/dev/null |
  head -1 | awk '{print $NF}')"
echo
# The tables' awk programs start with this: ROW[system, size] = a line of the system's rows
# file (named <system>.<kind>), SIZES[1..n] = zcx's sizes, and size_text.
table_awk='
  function size_text(b) {
    if (b >= 1048576 && b % 1048576 == 0) return b / 1048576 " MiB"
    if (b >= 1024 && b % 1024 == 0) return b / 1024 " KiB"
    return b " B"
  }
  FNR == 1 { sys = FILENAME; sub(/.*\//, "", sys); sub(/\.[a-z]+$/, "", sys) }
  { ROW[sys, $1] = $0; if (sys == "zcx") SIZES[++n] = $1 }
'
# One line per size of zcx's rows; each system's cell from its rows of the same size.
awk -v np="$np" -v cpus="${cpus:-?}" "$table_awk"'
  function cell(sys, s,   r, m, out) {
    if (!((sys, s) in ROW) || split(ROW[sys, s], r, " ") != 8) return "-"
    m = (s < 65536) ? 2 : 5
    out = sprintf("%s (%s-%s)", num(r[m]), num(r[m + 1]), num(r[m + 2]))
    if (r[8] != 0) out = out " WRONG " r[8]
    return out
  }
  function num(v) { return sprintf(v < 1 ? "%.3f" : "%.2f", v) }
  function med(sys, s,   r) {
    if (!((sys, s) in ROW) || split(ROW[sys, s], r, " ") != 8) return ""
    return (s < 65536) ? r[2] : r[5]
  }
  END {
    print "| size | metric | zcx | Open MPI ob1 | Open MPI ucx | Gloo ring (tcp) | memcpy (one per CPU) | zcx vs best peer |"
    print "|---:|---|---|---|---|---|---|---:|"
    for (i = 1; i <= n; ++i) {
      s = SIZES[i]; time = s < 65536
      best = ""
      for (k = split("ob1 ucx gloo", peers, " "); k > 0; --k) {
        p = med(peers[k], s)
        if (p == "" || p <= 0) continue
        if (best == "" || (time ? p < best : p > best)) best = p
      }
      z = med("zcx", s)
      ratio = (best == "" || z <= 0) ? "-" : sprintf("%.2fx", time ? best / z : z / best)
      printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", size_text(s),
             time ? "time us" : "busbw GB/s", cell("zcx", s), cell("ob1", s), cell("ucx", s),
             cell("gloo", s), cell("memcpy", s), ratio
    }
    print ""
    print "Cells: median (min-max) over the repetitions, out-of-place, time averaged over the " np " ranks;"
    print "below 64 KiB the time of one allreduce (lower is better), from 64 KiB busbw (higher is"
    print "better). memcpy: one copy of that size (time, or GB/s) while each of CPUs " cpus " copies its"
    print "own buffer at once; a ring allreduce'"'"'s busbw is the rate of its links, and within a host"
    print "those links are such copies, which the " np " ranks share. zcx vs best peer: the fastest of"
    print "Open MPI and Gloo at that size, as zcx'"'"'s speed-up over it."
  }' "$out/zcx.rows" "$out/ob1.rows" "$out/ucx.rows" "$out/gloo.rows" "$out/memcpy.rows"
[ -n "$overlap" ] || exit 0

echo
echo "Overlap of the posted form (zcx_iallreduce; Open MPI's MPI_Iallreduce), out of place:"
echo "computation for the pure time, a test every $overlap us of it (0: none); per cell the"
echo "total time of post + computation + wait (us), the pure time, and the overlap"
echo "100 * (1 - (total - pure) / pure): median (min-max) over the repetitions."
echo
awk "$table_awk"'
  function cell(sys, s,   r) {
    if (!((sys, s) in ROW) || split(ROW[sys, s], r, " ") != 6) return "-"
    return sprintf("%.2f us (pure %.2f), %.1f%% (%.1f-%.1f)", r[3], r[2], r[4], r[5], r[6])
  }
  END {
    print "| size | zcx | Open MPI ob1 | Open MPI ucx |"
    print "|---:|---|---|---|"
    for (i = 1; i <= n; ++i)
      printf "| %s | %s | %s | %s |\n", size_text(SIZES[i]), cell("zcx", SIZES[i]),
             cell("ob1", SIZES[i]), cell("ucx", SIZES[i])
  }' "$out/zcx.overlap" "$out/ob1.overlap" "$out/ucx.overlap"
