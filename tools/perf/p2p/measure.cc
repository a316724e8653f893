#include "p2p/measure.h"

#include "common/clock.h"
#include "common/config_vars.h"
#include "engine/timer.h"

#include <algorithm>
#include <deque>

namespace zcx::perf {
namespace {

unsigned char pattern_byte(size_t i, size_t bytes, int from) {
  return static_cast<unsigned char>((i * 131 + bytes * 7 + static_cast<size_t>(from) * 29) >> 1);
}

void fill_pattern(unsigned char* buf, size_t bytes, int from) {
  for (size_t i = 0; i < bytes; ++i) buf[i] = pattern_byte(i, bytes, from);
}

Status check_pattern(const Link& link, const unsigned char* buf, size_t bytes, size_t got,
                     int from) {
  if (got != bytes)
    return set_error(Status::kProtocol, kLogNet, "from %s: received %zu bytes, expected %zu",
                     link.peer_name().c_str(), got, bytes);
  for (size_t i = 0; i < bytes; ++i)
    if (buf[i] != pattern_byte(i, bytes, from))
      return set_error(Status::kProtocol, kLogNet,
                       "from %s: byte %zu of a %zu-byte message is 0x%02x, expected 0x%02x",
                       link.peer_name().c_str(), i, bytes, buf[i], pattern_byte(i, bytes, from));
  return Status::kSuccess;
}

// Keeps up to `window` requests in flight until `total` have completed; `post` posts one
// (or returns a null request: retry later). Fails when nothing completes for ZCX_TIMEOUT.
template <typename Post>
Status run_window(Link& link, int total, int window, size_t bytes, bool receiving, Post post) {
  std::deque<void*> inflight;
  int posted = 0, completed = 0;
  const int64_t timeout_ms = params::timeout_ms();
  PollDeadline deadline(timeout_ms);
  while (completed < total) {
    while (posted < total && static_cast<int>(inflight.size()) < window) {
      void* req = nullptr;
      ZCX_TRY(post(&req));
      if (req == nullptr) break;
      inflight.push_back(req);
      ++posted;
    }
    bool done = false;
    size_t got = 0;
    if (inflight.empty()) {  // nothing accepted yet (e.g. ib waits for the receiver's CTS)
      if (deadline.expired())
        return set_error(Status::kTimeout, kLogNet, "with %s: no transfer accepted within "
                         "ZCX_TIMEOUT", link.peer_name().c_str());
      continue;
    }
    ZCX_TRY(link.test(inflight.front(), &done, &got));
    if (done) {
      inflight.pop_front();
      ++completed;
      deadline = PollDeadline(timeout_ms);
      if (receiving && got != bytes)
        return set_error(Status::kProtocol, kLogNet, "with %s: a transfer moved %zu bytes, "
                         "expected %zu", link.peer_name().c_str(), got, bytes);
    } else if (deadline.expired()) {
      return set_error(Status::kTimeout, kLogNet, "with %s: %d of %d transfers done, no "
                       "progress within ZCX_TIMEOUT", link.peer_name().c_str(), completed, total);
    }
  }
  return Status::kSuccess;
}

}  // namespace

Status verify_exchange(Link& link, int rank, size_t bytes) {
  void *sreq = nullptr, *rreq = nullptr;
  size_t got = 0;
  fill_pattern(link.send_buf(), bytes, rank);
  std::fill(link.recv_buf(), link.recv_buf() + bytes, static_cast<unsigned char>(0));
  ZCX_TRY(link.irecv(bytes, &rreq));
  ZCX_TRY(link.isend(bytes, &sreq));
  ZCX_TRY(link.wait_both(sreq, rreq, &got));
  return check_pattern(link, link.recv_buf(), bytes, got, 1 - rank);
}

Status latency_rep(Link& link, int rank, size_t bytes, int iters, double* one_way_us,
                   std::vector<double>* per_iter) {
  Stopwatch watch;
  int64_t last_ns = now_ns();
  for (int i = 0; i < iters; ++i) {
    if (per_iter != nullptr && i > 0) {
      int64_t t = now_ns();
      per_iter->push_back(static_cast<double>(t - last_ns) / 2e3);
      last_ns = t;
    }
    void *sreq = nullptr, *rreq = nullptr;
    ZCX_TRY(link.irecv(bytes, &rreq));
    if (rank == 1) ZCX_TRY(link.wait(rreq, nullptr));
    ZCX_TRY(link.isend(bytes, &sreq));
    ZCX_TRY(link.wait(sreq, nullptr));
    if (rank == 0) ZCX_TRY(link.wait(rreq, nullptr));
  }
  if (per_iter != nullptr) per_iter->push_back(static_cast<double>(now_ns() - last_ns) / 2e3);
  *one_way_us = watch.elapsed_us() / iters / 2;
  return Status::kSuccess;
}

Status bandwidth_rep(Link& link, int rank, size_t bytes, int iters, int window, double* gbps) {
  Stopwatch watch;
  void* ack = nullptr;
  if (rank == 0) {
    ZCX_TRY(link.irecv(1, &ack));  // posted first: the acknowledgement never waits for it
    ZCX_TRY(run_window(link, iters, window, bytes, false,
                       [&](void** req) { return link.try_isend(bytes, req); }));
    ZCX_TRY(link.wait(ack, nullptr));
    *gbps = static_cast<double>(bytes) * iters / watch.elapsed_s() / 1e9;
    return Status::kSuccess;
  }
  ZCX_TRY(run_window(link, iters, window, bytes, true,
                     [&](void** req) { return link.try_irecv(bytes, req); }));
  ZCX_TRY(link.isend(1, &ack));
  return link.wait(ack, nullptr);
}

}  // namespace zcx::perf
