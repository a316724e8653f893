#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest: every rdma-guest test over rxe0. A test that skips in here
# means the guest's RDMA device was not usable, so a skip fails the suite rather than letting
# it pass without having exercised the ib path.
set -u -o pipefail
build=$1
log=$(mktemp)
ctest --test-dir "$build" -L rdma-guest --output-on-failure --timeout 600 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if grep -q "(Skipped)" "$log"; then
  echo "guest-suite: rdma-guest tests were skipped inside the guest (rxe0 not usable?)" >&2
  rc=1
fi
rm -f "$log"
exit "$rc"
