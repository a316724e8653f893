#!/usr/bin/env bash
# compare.sh: zcx-perf p2p over the tcp provider against Open MPI's tcp BTL (and, when
# installed, UCX's ucx_perftest over tcp), in one run on this host, same sizes and method:
#   8 B latency   one-way = ping-pong round trip / 2 (median over reps)
#   64 MiB bw     GB/s = 1e9 B/s, window of messages in flight (median over reps)
# Targets: zcx 64 MiB bandwidth >= 1.2 x Open MPI tcp; zcx 8 B latency <= 4 us.
# For context it also prints zcx with one connection per direction (ZCX_DUPLEX_WAIT=0) and
# the kernel's loopback floor: tools/perf/tcp_pingpong.c, no library, over one socket and
# over two, and a one-way stream, whole and in zcx's 160K pieces. The VM's speed drifts
# within minutes, so the repetitions run in rounds, each round every measurement once: a
# drift reaches every column alike.
#
# usage: tools/perf/compare.sh [--build DIR] [--reps R]
#   --build DIR   the zcx build folder with tools/run/zcx-run and tools/perf/zcx-perf
#                 (default: ./build); ZCX_RUN / ZCX_PERF override the two paths
#   --reps R      rounds: repetitions per measurement (default 5)
# It installs nothing; it says which tools are missing. Exit code 0 when both targets are
# met, 1 when a target is missed, 2 when something could not run.
set -u -o pipefail

build=build
reps=5
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
mpicc -O2 -o "$work/tcp_pingpong" "$here/tcp_pingpong.c" || { echo "compare.sh: mpicc failed" >&2; exit 2; }
mpicc -O2 -o "$work/line_bounce" "$here/line_bounce.c" || { echo "compare.sh: mpicc failed" >&2; exit 2; }

# Table row fields (zcx-perf and mpi_pingpong print the same columns):
#   size iters window lat_med lat_min lat_max bw_med bw_min bw_max lat_typ
row() { sed 's/^\[[0-9]*\] //' "$1" | grep -E '^ +[0-9]+ ' | tail -1; }
field() { row "$1" | awk -v f="$2" '{print $f}'; }

run_zcx() {  # $1: -t value, $2: size, $3: output file; one repetition
  "$zcx_run" -np 2 --timeout 900 -- "$zcx_perf" p2p --provider tcp -t "$1" -b "$2" -e "$2" \
    --reps 1 > "$3" 2>&1
}
run_zcx1() {  # the same with one connection per direction (ZCX_DUPLEX_WAIT=0), for contrast
  ZCX_DUPLEX_WAIT=0 run_zcx "$@"
}
run_mpi() {
  mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl tcp,self --mca pml ob1 \
    "$work/mpi_pingpong" -t "$1" -b "$2" -e "$2" --reps 1 > "$3" 2>&1
}
run_floor() {  # the kernel's loopback floor, no library: $1 duplex|oneway|stream|pieces,
  local mode=$1 iters=20000 piece=0  # $3 output; pieces: a stream in 160K send()s
  [ "$mode" = pieces ] && mode=stream piece=163840
  [ "$mode" = stream ] && iters=20
  "$work/tcp_pingpong" "$mode" "$iters" 1 "$2" "$piece" > "$3" 2>&1
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
# "median (min-max)" and the median of the numbers in a file, one per line
spread() { sort -n "$1" | awk '{v[NR]=$1} END {printf "%.2f (%.2f-%.2f)", v[int((NR+1)/2)], v[1], v[NR]}'; }
median() { sort -n "$1" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# One round runs every measurement once; the rounds interleave them, so a change of the
# VM's speed within the run (it drifts within minutes) reaches every column alike.
# run name, tool, -t value, size, then "file:field" pairs taken from its output row.
measurements=("zcx_lat zcx lat 8 zcx_lat:4 zcx_typ:10" "zcx_bw zcx bw 64M zcx_bw:7"
              "mpi_lat mpi lat 8 mpi_lat:4 mpi_typ:10" "mpi_bw mpi bw 64M mpi_bw:7"
              "zcx1_lat zcx1 lat 8 zcx1_lat:4" "floor_duplex floor duplex 8 floor_duplex:1"
              "floor_oneway floor oneway 8 floor_oneway:1"
              "floor_stream floor stream 67108864 floor_stream:1"
              "floor_pieces floor pieces 67108864 floor_pieces:1")
measure_round() {
  local m name tool t size pair out
  for m in "${measurements[@]}"; do
    set -- $m
    name=$1 tool=$2 t=$3 size=$4
    shift 4
    out="$work/out_$name"
    if ! "run_$tool" "$t" "$size" "$out"; then
      echo "compare.sh: the $tool -t $t run failed:" >&2
      tail -20 "$out" >&2
      exit 2
    fi
    for pair in "$@"; do
      if [ "$tool" = floor ]; then head -1 "$out" >> "$work/v_${pair%%:*}"
      else field "$out" "${pair##*:}" >> "$work/v_${pair%%:*}"; fi
    done
  done
  "$work/line_bounce" 20000 >> "$work/v_bounce"
}
for round in $(seq 1 "$reps"); do
  echo "# round $round of $reps ..."
  measure_round
done
ucx_lat="-"
if [ $have_ucx = 1 ]; then
  echo "# running ucx_perftest tag_lat 8 B over tcp ..."
  run_ucx_lat "$work/ucx_lat" && ucx_lat=$(awk '/^Final:/ {print $3}' "$work/ucx_lat")
  [ -n "$ucx_lat" ] || ucx_lat="-"
else
  echo "# ucx_perftest not installed (Debian: ucx-utils): UCX column left out"
fi

zl=$(median "$work/v_zcx_lat"); ml=$(median "$work/v_mpi_lat")
zb=$(median "$work/v_zcx_bw"); mb=$(median "$work/v_mpi_bw")
zt=$(median "$work/v_zcx_typ"); mt=$(median "$work/v_mpi_typ")
lat_ok=$(awk -v z="$zl" 'BEGIN {print (z <= 4.0) ? "met" : "MISSED"}')
bw_ok=$(awk -v z="$zb" -v m="$mb" 'BEGIN {print (z >= 1.2 * m) ? "met" : "MISSED"}')
status=0
[ "$lat_ok" = met ] && [ "$bw_ok" = met ] || status=1
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
by_round() { paste "$1" "$2" | awk '{printf "%.3f\n", $1 / $2}' > "$3"; }
by_round "$work/v_zcx_bw" "$work/v_mpi_bw" "$work/v_bw_ratio"
by_round "$work/v_floor_stream" "$work/v_mpi_bw" "$work/v_floor_ratio"
by_round "$work/v_zcx_bw" "$work/v_floor_stream" "$work/v_zcx_floor"
line() { printf '%-22s %-22s %-22s %-8s %-12s %s\n' "$@"; }

echo
line "metric (median, min-max)" "zcx tcp" "Open MPI tcp" "zcx/MPI" "UCX tcp" "target"
line "8 B latency (us)" "$(spread "$work/v_zcx_lat")" "$(spread "$work/v_mpi_lat")" \
  "$(ratio "$zl" "$ml")" "-" "zcx <= 4 us: $lat_ok"
line "8 B latency typ (us)" "$zt" "$mt" "$(ratio "$zt" "$mt")" "$ucx_lat" \
  "(median of single round trips)"
line "8 B lat, 2 conns (us)" "$(spread "$work/v_zcx1_lat")" "-" "-" "-" \
  "(zcx with ZCX_DUPLEX_WAIT=0: one connection per direction)"
line "8 B floor, 1 socket" "$(spread "$work/v_floor_duplex")" "-" "-" "-" \
  "(no library: tools/perf/tcp_pingpong.c duplex)"
line "8 B floor, 2 sockets" "$(spread "$work/v_floor_oneway")" "-" "-" "-" \
  "(the same, one socket per direction)"
line "64 MiB bw (GB/s)" "$(spread "$work/v_zcx_bw")" "$(spread "$work/v_mpi_bw")" \
  "$(ratio "$zb" "$mb")" "-" "zcx/MPI >= 1.2: $bw_ok"
line "64 MiB zcx/MPI by round" "$(spread "$work/v_bw_ratio")" "-" "-" "-" \
  "(the two measured back to back in each round)"
line "64 MiB floor (GB/s)" "$(spread "$work/v_floor_stream")" "-" "-" "-" \
  "(no library: tcp_pingpong.c stream, 1 socket)"
line "64 MiB floor 160K" "$(spread "$work/v_floor_pieces")" "-" "-" "-" \
  "(the same stream in 160K send()s, as zcx sends to a peer on this host)"
# The no-library stream against both, round by round: it is no ceiling (zcx has passed it),
# but it tells a round where the kernel was slow from one where a library was.
line "64 MiB floor/MPI by round" "$(spread "$work/v_floor_ratio")" "-" "-" "-" \
  "(the no-library stream against Open MPI, same round)"
line "64 MiB zcx/floor by round" "$(spread "$work/v_zcx_floor")" "-" "-" "-" \
  "(what zcx keeps of the kernel's stream speed)"
echo "# vCPU cache-line bounce per round: $(tr '\n' ' ' < "$work/v_bounce")ns (about 60: the"
echo "# two vCPUs share a cache; 250 and more: they do not, and everything is slower)"
echo "# reps $reps; latency one-way = RTT/2 (median, min-max over reps of the mean of n round"
echo "# trips; typ = median over single round trips, like perftest's t_typical and the UCX"
echo "# column, ucx_perftest's 50th percentile); GB/s = 1e9 B/s; targets use the medians over reps"
exit $status
