#!/usr/bin/env bash
# compare.sh: zcx-perf p2p over the tcp provider against Open MPI's tcp BTL (and, when
# installed, UCX's ucx_perftest over tcp), in one run on this host, same sizes and method:
#   8 B latency   one-way = ping-pong round trip / 2 (median over reps)
#   64 MiB bw     GB/s = 1e9 B/s, window of messages in flight (median over reps)
# Targets: zcx 64 MiB bandwidth >= 1.2 x Open MPI tcp; zcx 8 B latency <= 4 us.
#
# usage: tools/perf/compare.sh [--build DIR] [--reps R]
#   --build DIR   the zcx build folder with tools/run/zcx-run and tools/perf/zcx-perf
#                 (default: ./build); ZCX_RUN / ZCX_PERF override the two paths
#   --reps R      repetitions per measurement (default 5)
# It installs nothing; it says which tools are missing. Exit code 0 when both targets are
# met, 1 when a target is missed, 2 when something could not run.
set -u -o pipefail

build=build
reps=5
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
zcx_run=${ZCX_RUN:-$build/tools/run/zcx-run}
zcx_perf=${ZCX_PERF:-$build/tools/perf/zcx-perf}
missing=()
for tool in mpicc mpirun; do
  command -v "$tool" >/dev/null || missing+=("$tool (Debian: openmpi-bin, libopenmpi-dev)")
done
[ -x "$zcx_run" ] || missing+=("$zcx_run (build zcx: ninja -C $build zcx-run)")
[ -x "$zcx_perf" ] || missing+=("$zcx_perf (build zcx: ninja -C $build zcx-perf)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "compare.sh: missing:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 2
fi
have_ucx=0
command -v ucx_perftest >/dev/null && have_ucx=1

work=$(mktemp -d /tmp/zcx-compare.XXXXXX)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/mpi_pingpong" "$here/mpi_pingpong.c" || { echo "compare.sh: mpicc failed" >&2; exit 2; }

# Table row fields (zcx-perf and mpi_pingpong print the same columns):
#   size iters window lat_med lat_min lat_max bw_med bw_min bw_max lat_typ
row() { sed 's/^\[[0-9]*\] //' "$1" | grep -E '^ +[0-9]+ ' | tail -1; }
field() { row "$1" | awk -v f="$2" '{print $f}'; }

run_zcx() {  # $1: -t value, $2: size, $3: output file
  "$zcx_run" -np 2 --timeout 900 -- "$zcx_perf" p2p --provider tcp -t "$1" -b "$2" -e "$2" \
    --reps "$reps" > "$3" 2>&1
}
run_zcx1() {  # the same with one connection per direction (ZCX_DUPLEX_WAIT=0), for contrast
  ZCX_DUPLEX_WAIT=0 run_zcx "$@"
}
run_mpi() {
  mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl tcp,self --mca pml ob1 \
    "$work/mpi_pingpong" -t "$1" -b "$2" -e "$2" --reps "$reps" > "$3" 2>&1
}
run_ucx_lat() {  # ucx_perftest over tcp: 8 B tag latency (its lat tests report one-way)
  local port=$(( 20000 + RANDOM % 20000 ))
  UCX_TLS=tcp,self timeout 120 ucx_perftest -p "$port" -t tag_lat -s 8 -n 20000 \
    > "$work/ucx_server" 2>&1 &
  local server=$!
  sleep 1
  UCX_TLS=tcp,self timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t tag_lat -s 8 -n 20000 \
    > "$1" 2>&1
  wait "$server"
}

export ZCX_TIMEOUT=${ZCX_TIMEOUT:-120}  # a stuck run fails in minutes, not after the default 300 s
status=0
echo "# compare.sh on $(hostname), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for run in "zcx lat 8 $work/zcx_lat" "zcx bw 64M $work/zcx_bw" \
           "mpi lat 8 $work/mpi_lat" "mpi bw 64M $work/mpi_bw" "zcx1 lat 8 $work/zcx1_lat"; do
  set -- $run
  echo "# running $1 -t $2 size $3 ..."
  if ! "run_$1" "$2" "$3" "$4" || [ -z "$(row "$4")" ]; then
    echo "compare.sh: the $1 $2 run failed:" >&2
    tail -20 "$4" >&2
    exit 2
  fi
done
ucx_lat="-"
if [ $have_ucx = 1 ]; then
  echo "# running ucx_perftest tag_lat 8 B over tcp ..."
  run_ucx_lat "$work/ucx_lat" && ucx_lat=$(awk '/^Final:/ {print $3}' "$work/ucx_lat")
  [ -n "$ucx_lat" ] || ucx_lat="-"
else
  echo "# ucx_perftest not installed (Debian: ucx-utils): UCX column left out"
fi

zl=$(field "$work/zcx_lat" 4); ml=$(field "$work/mpi_lat" 4)
zb=$(field "$work/zcx_bw" 7); mb=$(field "$work/mpi_bw" 7)
zl_range="$(field "$work/zcx_lat" 5)-$(field "$work/zcx_lat" 6)"
ml_range="$(field "$work/mpi_lat" 5)-$(field "$work/mpi_lat" 6)"
zb_range="$(field "$work/zcx_bw" 8)-$(field "$work/zcx_bw" 9)"
mb_range="$(field "$work/mpi_bw" 8)-$(field "$work/mpi_bw" 9)"
lat_ok=$(awk -v z="$zl" 'BEGIN {print (z <= 4.0) ? "met" : "MISSED"}')
bw_ok=$(awk -v z="$zb" -v m="$mb" 'BEGIN {print (z >= 1.2 * m) ? "met" : "MISSED"}')
[ "$lat_ok" = met ] && [ "$bw_ok" = met ] || status=1

echo
printf '%-22s %-22s %-22s %-8s %-12s %s\n' "metric (median, min-max)" "zcx tcp" "Open MPI tcp" \
  "zcx/MPI" "UCX tcp" "target"
printf '%-22s %-22s %-22s %-8s %-12s %s\n' "8 B latency (us)" "$zl ($zl_range)" \
  "$ml ($ml_range)" "$(awk -v a="$zl" -v b="$ml" 'BEGIN {printf "%.2f", a / b}')" \
  "-" "zcx <= 4 us: $lat_ok"
zt=$(field "$work/zcx_lat" 10); mt=$(field "$work/mpi_lat" 10)
printf '%-22s %-22s %-22s %-8s %-12s %s\n' "8 B latency typ (us)" "$zt" "$mt" \
  "$(awk -v a="$zt" -v b="$mt" 'BEGIN {printf "%.2f", a / b}')" "$ucx_lat" "(median of single round trips)"
z1="$(field "$work/zcx1_lat" 4) ($(field "$work/zcx1_lat" 5)-$(field "$work/zcx1_lat" 6))"
printf '%-22s %-22s %-22s %-8s %-12s %s\n' "8 B lat, 2 conns (us)" "$z1" "-" "-" "-" \
  "(zcx with ZCX_DUPLEX_WAIT=0: one connection per direction)"
printf '%-22s %-22s %-22s %-8s %-12s %s\n' "64 MiB bw (GB/s)" "$zb ($zb_range)" \
  "$mb ($mb_range)" "$(awk -v a="$zb" -v b="$mb" 'BEGIN {printf "%.2f", a / b}')" "-" \
  "zcx/MPI >= 1.2: $bw_ok"
echo "# reps $reps; latency one-way = RTT/2 (median, min-max over reps of the mean of n round"
echo "# trips; typ = median over single round trips, like perftest's t_typical and the UCX"
echo "# column, ucx_perftest's 50th percentile); GB/s = 1e9 B/s; targets use the medians over reps"
exit $status
