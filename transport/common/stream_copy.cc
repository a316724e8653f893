// Non-temporal copies (stream_copy.h).
#include "common/stream_copy.h"

#include <emmintrin.h>

#include <cstdint>
#include <cstring>

namespace zcx {
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

}  // namespace

void copy_maybe_streaming(void* dst_v, const void* src_v, size_t n, bool stream) {
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
  _mm_sfence();  // streamed stores are visible before whatever the caller publishes next
}

}  // namespace zcx
