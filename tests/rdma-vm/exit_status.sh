#!/usr/bin/env bash
# run.sh hands back the guest command's exit status: a command that exits 3 makes it exit 3.
# (A missing newline in the generated guest script once made every guest command, failing
# tests included, come back as 0.) A skip (77: no QEMU or kernel) passes through.
#   tests/rdma-vm/exit_status.sh OUT_DIR
set -u
"$(dirname "$0")/run.sh" --timeout 300 --out "$1" -- bash -c 'exit 3'
rc=$?
[ "$rc" = 77 ] && exit 77
if [ "$rc" = 3 ]; then
  echo "exit-status: run.sh returned the guest command's 3"
  exit 0
fi
echo "exit-status: run.sh exited $rc, want the guest command's 3"
exit 1
