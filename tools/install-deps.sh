#!/usr/bin/env bash
# Installs the Debian packages zcx needs, idempotently: only missing packages are fetched.
#   tools/install-deps.sh build   compilers, cmake, ninja, googletest
#   tools/install-deps.sh test    build + what the tests use (rdma-core, UCX, Open MPI, QEMU)
#   tools/install-deps.sh bench   test + what the peer benchmarks use (perftest, ucx-utils, gloo)
# Every optional dependency is detected at configure time; a missing one only disables its
# part. Set ZCX_SKIP_APT=1 to skip installation (e.g. on a machine without root).
set -euo pipefail

profile=${1:-test}
build_pkgs=(g++ cmake ninja-build pkg-config googletest libgtest-dev)
test_pkgs=(libibverbs-dev librdmacm-dev ibverbs-providers ibverbs-utils libucx-dev ucx-utils
           libopenmpi-dev openmpi-bin qemu-system-x86 busybox-static cpio kmod iproute2)
bench_pkgs=(perftest libgloo-dev)

case "$profile" in
  build) want=("${build_pkgs[@]}") ;;
  test) want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
  bench) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac

if [[ "${ZCX_SKIP_APT:-0}" == 1 ]]; then
  echo "install-deps: ZCX_SKIP_APT=1, not installing anything"
  exit 0
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#want[@]} packages for '$profile' are installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages (${missing[*]}) and not root; install them first" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
timeout 600 apt-get update -qq
timeout 1200 apt-get install -y -qq --no-install-recommends "${missing[@]}"
