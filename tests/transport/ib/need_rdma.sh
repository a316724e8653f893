#!/bin/sh
# Runs "$@" only where an RDMA device exists (inside tests/rdma-vm/run.sh); elsewhere
# prints why and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE 77).
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  echo "SKIP: no RDMA device here; run through tests/rdma-vm/run.sh (ctest -L rdma)"
  exit 77
fi
exec "$@"
