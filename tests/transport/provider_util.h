// Helpers shared by the provider tests: contexts, in-process connection set-up, request
// waiting with a deadline, and verifiable data patterns.
#pragma once

#include "base/provider.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zcx::test {

// A provider context for one simulated or real rank.
struct ProviderCtx {
  const zcx_provider_ops_t* ops = nullptr;
  void* ctx = nullptr;
  ProviderCtx() = default;
  ProviderCtx(const ProviderCtx&) = delete;
  ProviderCtx& operator=(const ProviderCtx&) = delete;
  ~ProviderCtx();
  zcx_status_t init(const zcx_provider_ops_t* o, int rank, int nranks, uint64_t secret);
};

// Connects a send comm on `from` to a recv comm on `to`, driving both state machines from
// this thread; fails after timeout_ms.
zcx_status_t connect_pair(ProviderCtx& from, ProviderCtx& to, void** send_comm,
                          void** recv_comm, int timeout_ms = 10000);

// Tests every request until all are done (in the order given by `order`, repeatedly);
// sizes[i] gets the first size of request i. Fails on an error or after timeout_ms.
zcx_status_t wait_requests(const zcx_provider_ops_t* ops, std::vector<void*>& reqs,
                           std::vector<size_t>* sizes, int timeout_ms = 60000);

// Tests each request once; a finished one becomes nullptr.
zcx_status_t test_each_once(const zcx_provider_ops_t* ops, std::vector<void*>& reqs);

// Bytes 8k to 8k+7 of a message, as one little-endian word: they depend on the sender rank,
// the message size and the offset. Whole words let a test read and write a word at a time
// (a sanitizer checks every access: byte by byte, the 256 MiB messages kept
// conformance_shm_threads4 52 s under ThreadSanitizer instead of 36).
inline uint64_t pattern_word(int rank, size_t size, size_t k) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  uint64_t x = k * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(rank) << 48) ^ size;
  return x ^ kOnes * (x >> 56) ^ kOnes * ((8 * k) & 0xff) ^ 0x0706050403020100ull;
}
// Byte i of a message: byte i % 8 of its word.
inline uint8_t pattern_byte(int rank, size_t size, size_t i) {
  return static_cast<uint8_t>(pattern_word(rank, size, i / 8) >> (8 * (i % 8)));
}
void fill_pattern(void* buf, size_t size, int rank);
// Returns "" when every byte matches, else a description of the first mismatch.
std::string check_pattern(const void* buf, size_t size, int rank);

// Posts a send/recv and retries while the provider says "retry later".
zcx_status_t post_send(const zcx_provider_ops_t* ops, void* comm, void* data, size_t size,
                       int tag, void* mhandle, void** req, int timeout_ms = 10000);
zcx_status_t post_recv(const zcx_provider_ops_t* ops, void* comm, int n, void** data,
                       size_t* sizes, int* tags, void** mhandles, void** req,
                       int timeout_ms = 10000);

}  // namespace zcx::test
