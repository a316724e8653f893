#!/bin/bash
# Runs a shell command inside a QEMU (TCG) guest that boots Debian's stock kernel with a
# Soft-RoCE device rxe0 (rdma_rxe on dummy0, GID index 1 = ::ffff:10.11.0.1).
# Recipe: shared/reference/softroce-vm.md. The host's root filesystem is shared read-only
# over virtio-9p with a tmpfs overlay, so host-built binaries run unchanged inside; the
# command runs as root in bash, in the host's current directory (writes there are thrown
# away at shutdown; only the out directory is shared back).
#
# Usage: tests/rdma-vm/run.sh [--out DIR] [--timeout S] [--env NAME]... -- command [args...]
#   --out DIR     writable directory shared with the guest (logs, exit code); default a
#                 fresh directory under $TMPDIR
#   --timeout S   bound for the guest run (boot + command), default 1200
#   --env NAME    pass host variable NAME into the guest (ZCX_*, GTEST_* pass by default)
# Exit status: the command's, 77 when the VM cannot be had (reason printed; ctest maps 77
# to SKIP), 98 when the VM failed to produce a result.
# Cache: ZCX_RDMA_VM_CACHE, else /var/cache/zcx-rdma-vm when writable, else
# ${TMPDIR:-/tmp}/zcx-rdma-vm-cache. The unpacked kernel is kept there between runs.
set -u -o pipefail

# A caller killed outright (ctest stopped by hand) must not leave the guest running: this
# script gets SIGTERM when its parent dies, and so does the timeout that owns QEMU (which
# passes it on). PR_SET_PDEATHSIG survives exec, so setpriv re-runs the script under it.
if [ -z "${RDMA_VM_PDEATHSIG:-}" ] && command -v setpriv >/dev/null; then
  RDMA_VM_PDEATHSIG=1 exec setpriv --pdeathsig TERM -- bash "$0" "$@"
fi

SKIP=77
NORESULT=98
out_dir=""
vm_timeout=1200
extra_env=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out_dir=$2; shift 2 ;;
    --timeout) vm_timeout=$2; shift 2 ;;
    --env) extra_env+=("$2"); shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "rdma-vm: no guest command given (see --help)" >&2; exit 2; }

log() { echo "rdma-vm: $*" >&2; }
skip() { echo "rdma-vm: SKIP: $*" >&2; exit $SKIP; }

# --- 1. host packages (idempotent) -----------------------------------------------------
need_pkgs="qemu-system-x86 busybox-static cpio kmod iproute2 libibverbs1 ibverbs-providers ibverbs-utils perftest"
install_packages() {
  local missing=()
  for p in $need_pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || skip "packages missing (${missing[*]}) and not root to install them"
  command -v apt-get >/dev/null || skip "packages missing (${missing[*]}) and no apt-get"
  log "installing ${missing[*]}"
  for try in 1 2 3; do
    if DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y \
        --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
      return 0
    fi
    timeout 300 apt-get update >/dev/null 2>&1 || true
    sleep 5  # dpkg may be locked by another installer
  done
  skip "cannot install ${missing[*]} with apt-get"
}
install_packages
for tool in qemu-system-x86_64 depmod modprobe cpio gzip; do
  command -v $tool >/dev/null || skip "$tool not found"
done
[ -x /bin/busybox ] || skip "/bin/busybox (busybox-static) not found"

# --- 2. the guest kernel (cached) ------------------------------------------------------
if [ -n "${ZCX_RDMA_VM_CACHE:-}" ]; then cache=$ZCX_RDMA_VM_CACHE
elif mkdir -p /var/cache/zcx-rdma-vm 2>/dev/null && [ -w /var/cache/zcx-rdma-vm ]; then
  cache=/var/cache/zcx-rdma-vm
else cache=${TMPDIR:-/tmp}/zcx-rdma-vm-cache; fi
mkdir -p "$cache" || skip "cannot create cache directory $cache"

kernel_package() {
  local pkg
  pkg=$(timeout 60 apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -1)
  if [ -z "$pkg" ]; then
    timeout 300 apt-get update >/dev/null 2>&1 || true
    pkg=$(timeout 60 apt-cache depends linux-image-amd64 2>/dev/null |
          sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -1)
  fi
  echo "$pkg"
}

fetch_kernel() {  # $1 package; unpacks into $cache/$1/kernel and runs depmod
  local pkg=$1 kver=${1#linux-image-} dir=$cache/$1
  [ -f "$dir/.ready" ] && return 0
  rm -rf "$dir" && mkdir -p "$dir" || return 1
  log "downloading $pkg (about 70 MB)"
  if ! (cd "$dir" && timeout 600 apt-get download "$pkg" >/dev/null 2>&1); then
    timeout 300 apt-get update >/dev/null 2>&1 || true
    (cd "$dir" && timeout 600 apt-get download "$pkg" >/dev/null 2>&1) || return 1
  fi
  timeout 300 dpkg -x "$dir"/"$pkg"_*.deb "$dir/kernel" || return 1
  timeout 120 depmod -b "$dir/kernel" "$kver" || return 1
  rm -f "$dir"/"$pkg"_*.deb
  touch "$dir/.ready"
}

kpkg=$(kernel_package)
if [ -z "$kpkg" ]; then  # offline: fall back to any kernel already in the cache
  kpkg=$(ls -1 "$cache" 2>/dev/null | grep '^linux-image-' | sort -V | tail -1)
  [ -n "$kpkg" ] && [ -f "$cache/$kpkg/.ready" ] ||
    skip "cannot resolve linux-image-amd64 (apt-cache depends) and nothing cached in $cache"
fi
exec 9>"$cache/.lock"
timeout 900 flock 9 || skip "timed out waiting for the cache lock $cache/.lock"
fetch_kernel "$kpkg" || skip "cannot download/unpack $kpkg into $cache"
flock -u 9
kver=${kpkg#linux-image-}
ktree=$cache/$kpkg/kernel
vmlinuz=$ktree/boot/vmlinuz-$kver
[ -f "$vmlinuz" ] || skip "kernel image $vmlinuz missing"

# --- 3. out directory and guest script -------------------------------------------------
if [ -z "$out_dir" ]; then out_dir=$(mktemp -d "${TMPDIR:-/tmp}/zcx-rdma-vm.XXXXXX"); fi
mkdir -p "$out_dir" && out_dir=$(cd "$out_dir" && pwd -P)
case "$out_dir" in *[[:space:]]*) echo "rdma-vm: --out path must not contain spaces" >&2; exit 2 ;; esac
rm -f "$out_dir/rc" "$out_dir/console.log" "$out_dir/init.log"
work=$(mktemp -d "${TMPDIR:-/tmp}/zcx-rdma-initrd.XXXXXX")
trap 'rm -rf "$work"' EXIT

{
  echo "#!/bin/bash"
  echo "# generated by tests/rdma-vm/run.sh"
  while IFS='=' read -r name _; do
    case "$name" in ZCX_*|GTEST_*) printf 'export %s=%q\n' "$name" "${!name}" ;; esac
  done < <(env)
  for name in "${extra_env[@]}"; do
    [ -n "${!name+x}" ] && printf 'export %s=%q\n' "$name" "${!name}"
  done
  printf 'export PATH=%q\n' "$PATH"
  # rxe under TCG (and a loaded host) loses packets now and then: a short QP timeout
  # (14: ~67 ms per try, as in softroce-vm.md) keeps each retransmission cheap.
  # RDMA_VM_GUEST marks the guest for scripts; not ZCX_-prefixed, which zcx would warn about
  # as an unknown variable of its own.
  echo "export RDMA_VM_GUEST=1 ZCX_IB_HCA=\${ZCX_IB_HCA:-rxe0} ZCX_IB_GID_INDEX=\${ZCX_IB_GID_INDEX:-1}"
  echo "export ZCX_IB_TIMEOUT=\${ZCX_IB_TIMEOUT:-14}"
  printf 'cd %q || exit 97\n' "$(pwd -P)"
  printf '%q ' "$@"
  echo  # ends the command's line: rc below must be a line of its own
  echo 'rc=$?'
  echo 'c=/sys/class/infiniband/rxe0/ports/1/hw_counters'
  echo 'echo "rdma-vm: rxe0 counters:" $(cd $c 2>/dev/null && grep -H . * 2>/dev/null | grep -v ":0$" | sed "s/:/=/")'
  echo 'exit $rc'
} > "$out_dir/guest-cmd.sh"

# --- 4. initramfs ----------------------------------------------------------------------
ird=$work/root
mkdir -p "$ird"/{bin,sbin,dev,proc,sys,tmp,lower,host,newroot,etc/libibverbs.d,lib/modules}
cp /bin/busybox "$ird/bin/busybox"
for a in sh mount umount mkdir cat cut sed echo sleep insmod chroot poweroff sync grep ls tr; do
  ln -sf busybox "$ird/bin/$a"
done

copy_with_libs() {  # copies an executable or library plus everything ldd lists
  local f=$1 lib
  mkdir -p "$ird$(dirname "$f")"
  cp -L "$f" "$ird$f"
  for lib in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*'); do
    [ -e "$ird$lib" ] && continue
    mkdir -p "$ird$(dirname "$lib")"
    cp -L "$lib" "$ird$lib"
  done
}
for t in ip rdma ibv_devinfo; do
  p=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v $t) || skip "$t not found on the host"
  copy_with_libs "$p"
done
# libibverbs dlopens its provider: ldd cannot see it.
for prov in /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so; do
  [ -e "$prov" ] && copy_with_libs "$prov"
done
cp /etc/libibverbs.d/rxe.driver "$ird/etc/libibverbs.d/" 2>/dev/null ||
  skip "/etc/libibverbs.d/rxe.driver missing (ibverbs-providers)"

# Module load order: crc32 first (rdma_rxe needs the crc32 shash but does not declare it).
roots="crc32_generic crc32-pclmul rdma_rxe ib_uverbs rdma_ucm dummy veth virtio_pci 9pnet_virtio 9p overlay"
: > "$ird/modules.list"
for m in $roots; do
  deps=$(timeout 60 modprobe -d "$ktree" -S "$kver" --show-depends "$m" 2>/dev/null) ||
    skip "module $m not found in $kpkg"
  while read -r kind path _; do
    [ "$kind" = insmod ] || continue  # "builtin x" needs nothing
    rel=${path#"$ktree"}
    grep -qxF "$rel" "$ird/modules.list" && continue
    mkdir -p "$ird$(dirname "$rel")"
    cp "$path" "$ird$rel"
    echo "$rel" >> "$ird/modules.list"
  done <<< "$deps"
done

cp "$(dirname "$0")/guest-init.sh" "$ird/init"
chmod +x "$ird/init"
(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.img" ||
  skip "cannot pack the initramfs"

# --- 5. boot ---------------------------------------------------------------------------
# QEMU's timeout runs as a direct child of this shell, so its death signal follows ours.
on_our_death=()
command -v setpriv >/dev/null && on_our_death=(setpriv --pdeathsig TERM --)
log "booting $kver under QEMU TCG ($(wc -l < "$ird/modules.list") modules); out: $out_dir"
start=$(date +%s)
"${on_our_death[@]}" timeout --kill-after=10 "$vm_timeout" \
  qemu-system-x86_64 -accel tcg -cpu max -m 3G -smp 2 -nographic -no-reboot \
  -kernel "$vmlinuz" -initrd "$work/initrd.img" \
  -append "console=ttyS0 loglevel=4 panic=-1 quiet zcx_out=$out_dir" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$out_dir",mount_tag=out,security_model=none \
  -nic none -serial mon:stdio < /dev/null 2>&1 | tee "$out_dir/console.log"
qrc=$?
log "guest finished after $(( $(date +%s) - start )) s (qemu exit $qrc)"
if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
  log "guest run exceeded --timeout $vm_timeout s"
  exit $NORESULT
fi
if [ ! -s "$out_dir/rc" ]; then
  log "the guest wrote no exit code (see $out_dir/console.log)"
  exit $NORESULT
fi
rc=$(cat "$out_dir/rc")
log "guest command exit status: $rc"
exit "$rc"
