# placement.sh: sourced by coll_compare.sh and shm_compare.sh. Where the hypervisor placed
# CPUs 0 and 1, read as the one-way time of a cache line bounced between them
# (line_bounce.c, which says what the readings mean on this project's VM).
#   placement_build DIR          compiles the probe into DIR/line_bounce (sets PLACEMENT_PROBE)
#   placement_ns                 one reading in ns ("?" when the probe cannot run)
#   placement_range_ok RANGE     whether RANGE is "LO-HI" (ns)
#   placement_in RANGE NS        whether the reading NS lies in RANGE
#   placement_await RANGE WAIT   prints the first reading in RANGE, or after WAIT seconds the
#                                last one, with status 1
#   placement_measure CMD...     runs CMD, which prints one figure. With NEAR=LO-HI set it
#                                first waits up to NEAR_WAIT seconds (default 60) for a
#                                reading in that range, and runs CMD again (at most twice more)
#                                when the reading after it is out of range: a figure taken
#                                while the vCPUs moved apart mixes two machines. The retakes,
#                                and the figures kept although placement moved, are counted
#                                for placement_summary (placement_build sets the counters up).
#   placement_summary            "# placement LO-HI ns (NEAR): N measurements retaken, M kept
#                                although it moved; now X ns" (nothing without NEAR)

placement_build() {
  PLACEMENT_PROBE=$1/line_bounce
  PLACEMENT_COUNTS=$1
  echo 0 > "$1/retakes"
  echo 0 > "$1/kept_moved"
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

# Counters live in files: placement_measure runs inside $(...), a subshell.
placement_bump() { echo $(($(cat "$PLACEMENT_COUNTS/$1") + 1)) > "$PLACEMENT_COUNTS/$1"; }

placement_measure() {
  [[ -z ${NEAR:-} ]] && { "$@"; return; }
  local try v
  for try in 1 2 3; do
    placement_await "$NEAR" "${NEAR_WAIT:-60}" >/dev/null || true
    v=$("$@")
    if placement_in "$NEAR" "$(placement_ns)"; then echo "$v"; return; fi
    if [[ $try -lt 3 ]]; then placement_bump retakes; fi
  done
  placement_bump kept_moved
  echo "$v"
}

placement_summary() {
  [[ -z ${NEAR:-} ]] && return
  printf "# placement %s ns (NEAR): %s measurements retaken, %s kept although it moved;" \
    "$NEAR" "$(cat "$PLACEMENT_COUNTS/retakes")" "$(cat "$PLACEMENT_COUNTS/kept_moved")"
  printf " now %s ns\n" "$(placement_ns)"
}
