#!/bin/sh
# /init of the rdma-vm initramfs (busybox sh). Loads the modules, creates rxe0 on dummy0,
# mounts the host root (9p, read-only) under a tmpfs overlay, chroots into it and runs
# <out>/guest-cmd.sh. The exit status goes to <out>/rc, then the guest powers off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

fail() {
  echo "rdma-vm guest: $*"
  [ -n "$OUT" ] && [ -d "/host$OUT" ] && echo 96 > "/host$OUT/rc" && sync
  poweroff -f
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp

for m in $(cat /modules.list); do
  insmod "$m" 2>/dev/null || echo "rdma-vm guest: insmod $m failed (continuing)"
done

OUT=$(sed -n 's/.*zcx_out=\([^ ]*\).*/\1/p' /proc/cmdline)

# dummy.ko already created dummy0 (numdummies=1).
ip link set lo up
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
ip addr add 10.11.0.1/24 dev dummy0
ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0 || fail "rdma link add rxe0 failed"

mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose hostroot /lower ||
  fail "cannot mount the host root over 9p"
mount -t tmpfs -o size=75% tmpfs /newroot
mkdir -p /newroot/u /newroot/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/newroot/u,workdir=/newroot/w /host ||
  fail "cannot mount the overlay"
mount -o bind /proc /host/proc
mount -o bind /sys /host/sys
mount -o bind /dev /host/dev
mkdir -p /host/dev/shm && mount -t tmpfs tmpfs /host/dev/shm
mkdir -p /host/dev/pts && mount -t devpts devpts /host/dev/pts
mkdir -p "/host$OUT"
mount -t 9p -o trans=virtio,version=9p2000.L,rw,msize=524288 out "/host$OUT" ||
  fail "cannot mount the out share at $OUT"

echo "rdma-vm guest: rxe0 ready; running $OUT/guest-cmd.sh"
chroot /host /bin/bash "$OUT/guest-cmd.sh"
rc=$?
echo $rc > "/host$OUT/rc"
sync
echo "rdma-vm guest: command exit status $rc"
poweroff -f
