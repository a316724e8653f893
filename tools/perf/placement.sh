# placement.sh: sourced by coll_compare.sh and shm_compare.sh. Where the hypervisor placed
# CPUs 0 and 1, read as the one-way time of a cache line bounced between them
# (line_bounce.c, which says what the readings mean on this project's VM).
#   placement_build DIR          compiles the probe into DIR/line_bounce (sets PLACEMENT_PROBE)
#   placement_ns                 one reading in ns ("?" when the probe cannot run)
#   placement_range_ok RANGE     whether RANGE is "LO-HI" (ns)
#   placement_in RANGE NS        whether the reading NS lies in RANGE
#   placement_await RANGE WAIT   prints the first reading in RANGE, or after WAIT seconds the
#                                last one, with status 1

placement_build() {
  PLACEMENT_PROBE=$1/line_bounce
  cc -O2 -o "$PLACEMENT_PROBE" "$(dirname "${BASH_SOURCE[0]}")/line_bounce.c"
}

placement_ns() { "$PLACEMENT_PROBE" 100000 2>/dev/null || echo "?"; }

placement_range_ok() { [[ $1 =~ ^[0-9]+-[0-9]+$ ]]; }

placement_in() {
  awk -v r="$1" -v a="$2" 'BEGIN { split(r, b, "-"); exit !(a != "?" && a + 0 >= b[1] + 0 && a + 0 <= b[2] + 0) }'
}

placement_await() {
  local deadline=$((SECONDS + $2)) ns
  while :; do
    ns=$(placement_ns)
    placement_in "$1" "$ns" && { echo "$ns"; return 0; }
    [ $SECONDS -ge "$deadline" ] && { echo "$ns"; return 1; }
    sleep 2
  done
}
