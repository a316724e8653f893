// The data path: isend/irecv/test over the slot ring and the chunk stream. Sends and
// receives each complete strictly in posting order (pipelined messages in flight together
// share the stream: shm_interleave.cc); progress happens inside test() (and eagerly in
// isend/irecv when the queue was empty, which keeps small-message latency to one
// cache-line transfer).
#include "common/clock.h"
#include "common/config_vars.h"
#include "common/stream_copy.h"
#include "shm/shm.h"

#include <sched.h>

#include <cstdint>
#include <cstring>

namespace zcx::shm {
namespace {

constexpr uint64_t kPollsPerCheck = 256;      // idle polls between clock reads
constexpr int64_t kCheckIntervalNs = 2000000;  // liveness probe at most every 2 ms

inline uint8_t* slot_payload(SlotHeader* s) {
  return reinterpret_cast<uint8_t*>(s) + kSlotHeaderBytes;
}
// CMA splits a message: the receiver reads the first half, the sender writes the second.
inline size_t cma_half(size_t size) { return (size / 2) & ~size_t(4095); }

// ---- sender -------------------------------------------------------------------------

Status send_start(Comm* c, Request* r) {
  if (!slot_free(c)) {
    if (c->tail > c->head) return corrupt(c, "ring tail");
    return Status::kInProgress;
  }
  const bool inline_ok = r->size <= c->layout.inline_max();
  if (!inline_ok && !use_cma(c, r)) return group_start(c);
  SlotHeader* s = slot_at(c, c->head);
  s->size = r->size;
  s->tag = r->tag;
  if (inline_ok) {
    s->type = kSlotInline;
    if (r->size != 0) memcpy(slot_payload(s), r->data, r->size);
    r->done = true;
  } else {
    s->type = kSlotCma;
    s->aux = reinterpret_cast<uint64_t>(r->data);
    r->phase = kSendCmaRdv;
  }
  r->seq = ++c->head;
  s->seq.store(r->seq, std::memory_order_release);
  c->progressed = true;
  return Status::kSuccess;
}

Status send_cma(Comm* c, Request* r) {
  if (r->phase == kSendCmaRdv) {
    if (c->rline->rdv_seq.load(std::memory_order_acquire) != r->seq) return Status::kInProgress;
    uint64_t dst = c->rline->rdv_addr.load(std::memory_order_relaxed);
    size_t h = cma_half(r->size);
    const int64_t t0 = adaptive(c, r->size) ? now_ns() : 0;
    ZCX_TRY(cma_write(c, dst + h, r->data + h, r->size - h));
    // The receiver reads the other half meanwhile: the message moves at about the size over
    // this half's time.
    if (t0 != 0) copy_rate(c, true, r->size, r->size, t0);
    c->sline->cma_part_done.store(r->seq, std::memory_order_release);
    r->phase = kSendCmaDone;
    c->progressed = true;
  }
  if (c->rline->cma_done.load(std::memory_order_acquire) != r->seq) return Status::kInProgress;
  r->done = true;
  c->progressed = true;
  return Status::kSuccess;
}

Status progress_send(Comm* c) {
  while (Request* r = c->reqs.front()) {
    Status st = Status::kSuccess;
    if (r->phase == kSendNew) st = send_start(c, r);
    if (ok(st) && !r->done && r->phase == kSendGroup) st = group_stream(c);
    if (ok(st) && !r->done && r->phase >= kSendCmaRdv) st = send_cma(c, r);
    if (st != Status::kSuccess && st != Status::kInProgress) return st;
    if (!r->done) return Status::kSuccess;
    c->reqs.pop();  // done, also when the call that finished it stopped at a later member
  }
  return Status::kSuccess;
}

// ---- receiver -----------------------------------------------------------------------

Status recv_match(Comm* c, Request* r) {
  SlotHeader* s = slot_at(c, c->tail);
  if (s->seq.load(std::memory_order_acquire) != c->tail + 1) return Status::kInProgress;
  const uint64_t size = s->size;  // each shared field is read once, then validated
  const int tag = s->tag;
  const uint32_t type = s->type;
  const uint64_t aux = s->aux;
  if (type == kSlotPipe || type == kSlotPipeFine)
    return group_begin(c, aux, type == kSlotPipeFine);
  int i = -1;
  ZCX_TRY(match_buffer(c, r, tag, size, nullptr, &i));
  if (type == kSlotInline) {
    if (size > c->layout.inline_max()) return corrupt(c, "inline size");
    if (size != 0) memcpy(r->bufs[i], slot_payload(s), size);
    slot_release(c);
    recv_finish(c, r, i, size);
    return Status::kSuccess;
  }
  if (type != kSlotCma) return corrupt(c, "slot type");
  r->cur = i;
  r->cur_size = size;
  r->cur_seq = c->tail + 1;
  r->cur_addr = aux;
  r->phase = kRecvCmaRead;
  slot_release(c);
  c->progressed = true;
  return Status::kSuccess;
}

Status recv_cma(Comm* c, Request* r) {
  if (r->phase == kRecvCmaRead) {
    c->rline->rdv_addr.store(reinterpret_cast<uint64_t>(r->bufs[r->cur]),
                             std::memory_order_relaxed);
    c->rline->rdv_seq.store(r->cur_seq, std::memory_order_release);
    ZCX_TRY(cma_read(c, r->bufs[r->cur], r->cur_addr, cma_half(r->cur_size)));
    r->phase = kRecvCmaWait;
    c->progressed = true;
  }
  if (c->sline->cma_part_done.load(std::memory_order_acquire) != r->cur_seq)
    return Status::kInProgress;
  c->rline->cma_done.store(r->cur_seq, std::memory_order_release);
  recv_finish(c, r, r->cur, r->cur_size);
  return Status::kSuccess;
}

Status progress_recv(Comm* c) {
  while (Request* r = c->reqs.front()) {
    Status st = Status::kSuccess;
    while (ok(st) && !r->done) {
      if (c->group.active()) st = group_drain(c);
      else if (r->phase == kRecvMatch) st = recv_match(c, r);
      else st = recv_cma(c, r);
    }
    if (st != Status::kSuccess && st != Status::kInProgress) return st;
    if (!r->done) return Status::kSuccess;
    c->reqs.pop();  // done, also when the call that finished it stopped at a later member
  }
  return Status::kSuccess;
}

Status idle_poll(Comm* c) {
  if (++c->idle % kPollsPerCheck != 0) {
    if (c->idle > c->spin_limit) sched_yield();
    return Status::kSuccess;
  }
  int64_t now = now_ns();
  if (c->had_progress) {
    c->had_progress = false;
    c->last_progress_ns = now;
  }
  if (now - c->last_check_ns < kCheckIntervalNs) return Status::kSuccess;
  c->last_check_ns = now;
  Status st = check_peer(c, now);
  if (st == Status::kRemote) {
    // The peer closed or exited after its last stores: deliver what it left first. Its
    // flag/exit was observed after our last poll of the ring, so poll once more.
    Status again = c->is_send ? progress_send(c) : progress_recv(c);
    if (ok(again) && c->progressed) return Status::kSuccess;
  }
  if (!ok(st)) ZCX_WARN(kLogShm, "%s", last_error());
  return st;
}

}  // namespace

SlotHeader* slot_at(const Comm* c, uint64_t i) {
  return reinterpret_cast<SlotHeader*>(c->slots + (i & (c->layout.nslots - 1)) *
                                                      size_t(c->layout.slot_bytes));
}

uint8_t* chunk_at(const Comm* c, uint64_t i) {
  return c->chunks + (i & (c->group.nchunks - 1)) * size_t(c->group.chunk_bytes);
}

Status corrupt(Comm* c, const char* what) {
  return set_error(Status::kProtocol, kLogShm,
                   "shm segment shared with %s holds an invalid %s; connection closed",
                   peer_name(c).c_str(), what);
}

bool slot_free(Comm* c, uint64_t n) {
  if (c->head + n - c->tail <= c->layout.nslots) return true;
  c->tail = c->rline->tail.load(std::memory_order_acquire);
  return c->head + n - c->tail <= c->layout.nslots;
}

Status match_buffer(Comm* c, const Request* r, int tag, uint64_t size, const bool* taken,
                    int* index) {
  int i = 0;
  while (i < r->n && (r->filled[i] || (taken != nullptr && taken[i]) || r->tags[i] != tag)) ++i;
  if (i == r->n)
    return set_error(Status::kMismatch, kLogShm,
                     "message with tag %d from %s matches no buffer of the posted receive",
                     tag, peer_name(c).c_str());
  if (size > r->caps[i])
    return set_error(Status::kInvalidUsage, kLogShm,
                     "message of %llu bytes from %s exceeds the %zu-byte receive buffer",
                     static_cast<unsigned long long>(size), peer_name(c).c_str(), r->caps[i]);
  *index = i;
  return Status::kSuccess;
}

void recv_finish(Comm* c, Request* r, int i, size_t size) {
  r->got[i] = size;
  r->filled[i] = true;
  r->phase = kRecvMatch;
  r->cur = -1;
  if (++r->nfilled == r->n) r->done = true;
  c->progressed = true;
}

void slot_release(Comm* c, uint64_t n) {
  c->tail += n;
  c->rline->tail.store(c->tail, std::memory_order_release);
}

Status check_peer(Comm* c, int64_t now) {
  if (c->sock.valid()) ZCX_TRY(check_ack(c));
  if (c->is_send) c->sline->heartbeat.fetch_add(1, std::memory_order_relaxed);
  else c->rline->heartbeat.fetch_add(1, std::memory_order_relaxed);
  // Closed before gone: a peer that closed its side and then exited left cleanly, and is
  // named so, not as dead.
  uint32_t closed = c->is_send ? c->rline->closed.load(std::memory_order_acquire)
                               : c->sline->closed.load(std::memory_order_acquire);
  if (closed != 0)
    return set_error_quiet(Status::kRemote, "%s closed the shm connection",
                     peer_name(c).c_str());
  if (!c->watch.alive())
    return set_error_quiet(Status::kRemote,
                     "%s died (its process exited) with shm transfers in flight",
                     peer_name(c).c_str());
  if (now - c->last_progress_ns > c->timeout_ms * 1000000)
    return set_error_quiet(Status::kTimeout,
                     "no progress with %s for %.1f s over shm (ZCX_TIMEOUT); the peer is "
                     "alive but not sending or receiving", peer_name(c).c_str(),
                     static_cast<double>(now - c->last_progress_ns) / 1e9);
  return Status::kSuccess;
}

Status progress(Comm* c, bool eager) {
  if (c->error.has()) return c->error.raise();
  c->chunk_budget = eager ? c->layout.nchunks : SIZE_MAX;
  Status st = c->is_send ? progress_send(c) : progress_recv(c);
  if (ok(st) && !c->progressed) st = idle_poll(c);
  if (!ok(st)) {
    c->error.record(st, last_error());
    return st;
  }
  if (c->progressed) {
    c->progressed = false;
    c->had_progress = true;
    c->idle = 0;
  }
  return Status::kSuccess;
}

Status isend(Comm* c, const void* data, size_t size, int tag, Request** out) {
  *out = nullptr;
  if (c->error.has()) return c->error.raise();
  Request* r = c->reqs.alloc();
  if (r == nullptr) return Status::kSuccess;  // retry later
  r->comm = c;
  r->is_send = true;
  r->n = 1;
  r->data = static_cast<const uint8_t*>(data);
  r->size = size;
  r->tag = tag;
  c->reqs.push(r);
  if (c->reqs.queued() == 1) {
    c->had_progress = true;  // idle time before a post is no stall
    ZCX_TRY(progress(c, true));
  }
  *out = r;
  return Status::kSuccess;
}

Status irecv(Comm* c, int n, void** data, const size_t* sizes, const int* tags,
             Request** out) {
  *out = nullptr;
  if (n < 1 || n > kMaxRecvs)
    return set_error(Status::kInvalidArg, kLogShm, "shm irecv: n=%d, expected 1..%d", n,
                     kMaxRecvs);
  if (c->error.has()) return c->error.raise();
  for (int i = 0; i < n; ++i)
    if ((data[i] == nullptr && sizes[i] != 0) || sizes[i] > kMaxMessage)
      return set_error(Status::kInvalidArg, kLogShm,
                       "shm irecv: buffer %d is NULL or larger than %zu bytes", i, kMaxMessage);
  Request* r = c->reqs.alloc();
  if (r == nullptr) return Status::kSuccess;
  r->comm = c;
  r->is_send = false;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->filled[i] = false;
    r->got[i] = 0;
    r->bufs[i] = static_cast<uint8_t*>(data[i]);
    r->caps[i] = sizes[i];
    r->tags[i] = tags != nullptr ? tags[i] : 0;
  }
  c->reqs.push(r);
  c->posted += static_cast<uint64_t>(n);
  c->rline->posted.store(c->posted, std::memory_order_release);
  if (c->reqs.queued() == 1) {
    c->had_progress = true;
    ZCX_TRY(progress(c, true));
  }
  *out = r;
  return Status::kSuccess;
}

Status test(Request* r, int* done, size_t* sizes) {
  *done = 0;
  Comm* c = r->comm;
  if (!r->done) {
    // A failure after r completed in this call (a later message) waits for the next test.
    Status st = progress(c);
    if (!r->done) return st;
  }
  if (sizes != nullptr) {
    if (r->is_send) sizes[0] = r->size;
    else for (int i = 0; i < r->n; ++i) sizes[i] = r->got[i];
  }
  *done = 1;
  c->reqs.release(r);
  return Status::kSuccess;
}

RequestQueue::RequestQueue() : pool_(kMaxRequests), q_(kMaxRequests) {
  free_.reserve(kMaxRequests);
  for (int i = kMaxRequests - 1; i >= 0; --i) free_.push_back(&pool_[i]);
}

Request* RequestQueue::alloc() {
  if (free_.empty()) return nullptr;
  Request* r = free_.back();
  free_.pop_back();
  return r;
}

void RequestQueue::release(Request* r) {
  // Only the fields every post relies on are reset; isend/irecv set the rest.
  r->done = false;
  r->phase = 0;
  r->cma = -1;
  r->nfilled = 0;
  r->cur = -1;
  free_.push_back(r);
}

}  // namespace zcx::shm
