// Large-message copies: CMA (chunk copy-out streams through common/stream_copy.h).
#include "shm/shm.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace zcx::shm {
namespace {

Status cma_error(Comm* c, const char* op, int err) {
  if (err == ESRCH)
    return set_error(Status::kRemote, kLogShm, "%s died during a CMA transfer",
                     peer_name(c).c_str());
  return set_error(err == EFAULT ? Status::kProtocol : Status::kSystem, kLogShm,
                   "%s with %s failed: %s%s", op, peer_name(c).c_str(), strerror(err),
                   err == EPERM ? " (ptrace scope forbids CMA; set ZCX_SHM_LARGE=pipeline)"
                                : "");
}

}  // namespace

Status cma_read(Comm* c, void* dst, uint64_t src, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec local{static_cast<uint8_t*>(dst) + done, n - done};
    iovec remote{reinterpret_cast<void*>(src + done), n - done};
    ssize_t got = process_vm_readv(c->peer.pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return cma_error(c, "process_vm_readv", got < 0 ? errno : EFAULT);
    done += static_cast<size_t>(got);
  }
  return Status::kSuccess;
}

Status cma_write(Comm* c, uint64_t dst, const void* src, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec local{const_cast<uint8_t*>(static_cast<const uint8_t*>(src)) + done, n - done};
    iovec remote{reinterpret_cast<void*>(dst + done), n - done};
    ssize_t put = process_vm_writev(c->peer.pid, &local, 1, &remote, 1, 0);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return cma_error(c, "process_vm_writev", put < 0 ? errno : EFAULT);
    done += static_cast<size_t>(put);
  }
  return Status::kSuccess;
}

}  // namespace zcx::shm
