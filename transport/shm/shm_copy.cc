// Large-message copies: chunk copy-out (non-temporal stores past the caches) and CMA.
#include "shm/shm.h"

#include <emmintrin.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace zcx::shm {
namespace {

// Streams 64-byte blocks to a 16-byte-aligned destination; the caller handles the edges.
void stream_blocks(uint8_t* dst, const uint8_t* src, size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
}

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

void copy_out(void* dst_v, const void* src_v, size_t n, bool stream) {
  auto* dst = static_cast<uint8_t*>(dst_v);
  auto* src = static_cast<const uint8_t*>(src_v);
  if (!stream || n < 4096) {
    memcpy(dst, src, n);
    return;
  }
  size_t head = (64 - (reinterpret_cast<uintptr_t>(dst) & 63)) & 63;
  memcpy(dst, src, head);
  size_t body = (n - head) & ~size_t(63);
  stream_blocks(dst + head, src + head, body);
  memcpy(dst + head + body, src + head + body, n - head - body);
  _mm_sfence();  // streamed stores are visible before the chunk is released
}

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
