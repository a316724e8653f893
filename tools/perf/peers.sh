# peers.sh: sourced by coll_compare.sh and sweep_compare.sh. The programs zcx's allreduce is
# compared with, built and run on this host, each measuring a float32 sum allreduce the way
# `zcx-perf coll` does (nccl-tests' method: -w warm-up calls, --reps repetitions of -n calls,
# a repetition's time per call averaged over the ranks; median, min and max):
#   peers_build DIR      compiles mpi_allreduce.c (mpicc) and gloo_allreduce.cc (g++ and
#                        libgloo-dev) into DIR. Sets PEERS_MPI and PEERS_GLOO to the programs,
#                        or to "" with PEERS_MPI_WHY / PEERS_GLOO_WHY saying why not.
#   peer_run SYS NP TRANSPORT OUT FLAG...
#                        runs SYS (ob1: Open MPI's pml ob1, with the vader BTL on shm and the
#                        tcp BTL on tcp; ucx: its pml ucx, over UCX_TLS=tcp,self on tcp;
#                        gloo: Gloo's ring, always over TCP on lo) with NP local ranks; FLAGs
#                        are the programs' own (-b -e -f -n -w --reps); all output to OUT.
#                        Each run is cut off after PEERS_TIMEOUT seconds (default 900).
#   peer_rows OUT        the table rows of such an output, one per size:
#                        "size time_med time_min time_max busbw_med busbw_min busbw_max wrong"
#   zcx_rows JSON        the same rows from the --json file of `zcx-perf coll` (out-of-place;
#                        a size with a non-finite figure is left out)
#   peer_overlap_rows OUT, zcx_overlap_rows JSON
#                        with --overlap: "size pure_med total_med overlap_med overlap_min
#                        overlap_max" per size

peers_build() {
  local here
  here=$(dirname "${BASH_SOURCE[0]}")
  PEERS_MPI="" PEERS_GLOO="" PEERS_MPI_WHY="" PEERS_GLOO_WHY=""
  if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    PEERS_MPI_WHY="mpicc or mpirun not found (Debian: openmpi-bin, libopenmpi-dev)"
  elif mpicc -O2 -o "$1/mpi_allreduce" "$here/mpi_allreduce.c" >"$1/mpicc.log" 2>&1; then
    PEERS_MPI=$1/mpi_allreduce
  else
    PEERS_MPI_WHY="mpicc failed: $(tail -1 "$1/mpicc.log")"
  fi
  if [ ! -f /usr/include/gloo/allreduce.h ] || ! command -v g++ >/dev/null; then
    PEERS_GLOO_WHY="Gloo headers not installed (Debian: libgloo-dev)"
  elif g++ -O2 -std=c++17 -o "$1/gloo_allreduce" "$here/gloo_allreduce.cc" -lgloo -lpthread \
         >"$1/gloo.log" 2>&1; then
    PEERS_GLOO=$1/gloo_allreduce
  else
    PEERS_GLOO_WHY="building gloo_allreduce failed: $(tail -1 "$1/gloo.log")"
  fi
}

peer_run() {
  local sys=$1 np=$2 transport=$3 out=$4
  shift 4
  local mpirun_base=(timeout "${PEERS_TIMEOUT:-900}" mpirun --allow-run-as-root --oversubscribe
                     -np "$np")
  case $sys in
    ob1)
      local btl=self,vader
      [ "$transport" = tcp ] && btl=self,tcp
      "${mpirun_base[@]}" --mca pml ob1 --mca btl "$btl" "$PEERS_MPI" "$@" >"$out" 2>&1 ;;
    ucx)
      # Debian's pml ucx only opens for InfiniBand-class devices unless told any will do.
      local tls=()
      [ "$transport" = tcp ] && tls=(-x UCX_TLS=tcp,self)
      "${mpirun_base[@]}" --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        "${tls[@]}" "$PEERS_MPI" "$@" >"$out" 2>&1 ;;
    gloo) peer_run_gloo "$np" "$out" "$@" ;;
    *) echo "peer_run: unknown system '$sys'" >&2; return 2 ;;
  esac
}

# Gloo's ranks are plain local processes that meet in a fresh FileStore folder.
peer_run_gloo() {
  local np=$1 out=$2 store rank pids=() rc=0
  shift 2
  store=$(mktemp -d "$(dirname "$out")/gloo-store.XXXXXX")
  for rank in $(seq 0 $((np - 1))); do
    timeout "${PEERS_TIMEOUT:-900}" "$PEERS_GLOO" --store "$store" --rank "$rank" --size "$np" \
      --iface lo "$@" >"$out.$rank" 2>&1 &
    pids+=($!)
  done
  for rank in "${pids[@]}"; do wait "$rank" || rc=1; done
  cat "$out".* >"$out"
  rm -rf "$store" "$out".*
  return $rc
}

# mpi_allreduce and gloo_allreduce print "size count iters time_us(med min max)
# algbw(med min max) busbw(med min max) wrong" (gloo's behind zcx-run-style "[r] " prefixes).
peer_rows() {
  sed 's/^\[[0-9]*\] //' "$1" | awk '$1 ~ /^[0-9]+$/ && NF >= 13 { print $1, $4, $5, $6, $10, $11, $12, $13 }'
}

# zcx-perf's JSON (docs/PERF_JSON.md) writes each row's "size" on one line, and its
# out-of-place results (time_us, algbw_GBps, busbw_GBps as {median, min, max}, then wrong)
# and, with --overlap, its overlap (poll_us, compute_us, then pure_us, total_us and
# overlap_pct as {median, min, max}) each on a line of its own. This prints "size" and the
# numbers of each row's line that holds "$2": (rows whose line holds other than $3
# numbers, e.g. a null, are left out).
zcx_json_numbers() {  # $1 JSON, $2 key, $3 count
  awk -v key="\"$2\": " -v want="$3" '
       match($0, /"size": [0-9]+/) { size = substr($0, RSTART + 8, RLENGTH - 8) }
       index($0, key) {
         n = 0; line = size; rest = $0
         while (match(rest, /: -?[0-9][0-9.eE+-]*/)) {
           line = line " " substr(rest, RSTART + 2, RLENGTH - 2); rest = substr(rest, RSTART + RLENGTH)
           ++n
         }
         if (n == want) print line
       }' "$1"
}
zcx_rows() { zcx_json_numbers "$1" out_of_place 10 | awk '{ print $1, $2, $3, $4, $8, $9, $10, $11 }'; }

# mpi_allreduce --overlap appends pure_us_med total_us_med overlap_med overlap_min overlap_max.
peer_overlap_rows() {
  awk '$1 ~ /^[0-9]+$/ && NF >= 18 { print $1, $14, $15, $16, $17, $18 }' "$1"
}

zcx_overlap_rows() { zcx_json_numbers "$1" overlap 11 | awk '{ print $1, $4, $7, $10, $11, $12 }'; }
