// Helpers for the shm provider tests: a provider instance per "rank", connection set-up
// by polling connect/accept, and bounded polling of requests.
#pragma once

#include "base/provider.h"
#include "common/clock.h"
#include "common/status.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

extern "C" const zcx_provider_ops_t* zcx_provider_shm(void);

namespace zcx::shm_test {

inline const zcx_provider_ops_t* ops() { return zcx_provider_shm(); }

struct Rank {
  void* ctx = nullptr;
  explicit Rank(int rank, uint64_t secret = 0x5ec2e7, int nranks = 2) {
    zcx_provider_init_t self{};
    self.size = sizeof(self);
    self.rank = rank;
    self.nranks = nranks;
    self.secret = secret;
    snprintf(self.host, sizeof(self.host), "testhost");
    if (ops()->init(&self, &ctx) != ZCX_SUCCESS) ctx = nullptr;
  }
  ~Rank() {
    if (ctx != nullptr) (void)ops()->finalize(ctx);
  }
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;
};

// Polls connect (sender side) until a comm or an error; bounded by `ms`.
inline zcx_status_t connect_poll(void* ctx, const void* handle, void** sc, int ms = 5000) {
  Deadline dl = Deadline::after_ms(ms);
  *sc = nullptr;
  while (!dl.expired()) {
    zcx_status_t st = ops()->connect(ctx, 0, handle, sc);
    if (st != ZCX_SUCCESS || *sc != nullptr) return st;
  }
  return ZCX_ERR_TIMEOUT;
}

inline zcx_status_t accept_poll(void* lc, void** rc, int ms = 5000) {
  Deadline dl = Deadline::after_ms(ms);
  *rc = nullptr;
  while (!dl.expired()) {
    zcx_status_t st = ops()->accept(lc, rc);
    if (st != ZCX_SUCCESS || *rc != nullptr) return st;
  }
  return ZCX_ERR_TIMEOUT;
}

// In-process pair: `recv_rank` listens and accepts, `send_rank` connects.
struct Pair {
  void* lc = nullptr;
  void* sc = nullptr;
  void* rc = nullptr;
  zcx_status_t make(Rank& recv_rank, Rank& send_rank) {
    uint8_t handle[ZCX_HANDLE_BYTES];
    zcx_status_t st = ops()->listen(recv_rank.ctx, 0, handle, &lc);
    if (st == ZCX_SUCCESS) st = connect_poll(send_rank.ctx, handle, &sc);
    if (st == ZCX_SUCCESS) st = accept_poll(lc, &rc);
    return st;
  }
  ~Pair() {
    if (sc != nullptr) (void)ops()->close_send(sc);
    if (rc != nullptr) (void)ops()->close_recv(rc);
    if (lc != nullptr) (void)ops()->close_listen(lc);
  }
};

// Tests every request in `reqs` until all are done (entries become NULL) or one fails.
inline zcx_status_t wait_all(std::vector<void*>& reqs, std::vector<size_t>* sizes = nullptr,
                             int ms = 60000) {
  Deadline dl = Deadline::after_ms(ms);
  size_t left = 0;
  for (void* r : reqs) left += r != nullptr;
  while (left > 0) {
    if (dl.expired()) return ZCX_ERR_TIMEOUT;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i] == nullptr) continue;
      int done = 0;
      size_t sz[8] = {};
      zcx_status_t st = ops()->test(reqs[i], &done, sz);
      if (st != ZCX_SUCCESS) return st;
      if (done) {
        if (sizes != nullptr && i < sizes->size()) (*sizes)[i] = sz[0];
        reqs[i] = nullptr;
        --left;
      }
    }
  }
  return ZCX_SUCCESS;
}

// Posts one receive into `dst` (tag 0) on p.rc and tests it until it is done or fails.
inline zcx_status_t receive_once(Pair& p, std::vector<uint8_t>& dst) {
  void* bufs[1] = {dst.data()};
  size_t caps[1] = {dst.size()};
  int tags[1] = {0};
  void* req = nullptr;
  zcx_status_t st = ops()->irecv(p.rc, 1, bufs, caps, tags, nullptr, &req);
  int done = 0;
  while (st == ZCX_SUCCESS && req != nullptr && !done) st = ops()->test(req, &done, nullptr);
  return st;
}

inline void fill_pattern(std::vector<uint8_t>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
}

// Index of the first differing byte, or -1.
inline long first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                       size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return -1;
}

}  // namespace zcx::shm_test
