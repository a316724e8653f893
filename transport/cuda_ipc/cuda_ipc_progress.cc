// Data path of the cuda_ipc provider. test() drives everything, nothing blocks:
//  receiver  irecv exports its buffer in a POST; a DONE with the same seq completes it.
//  sender    the k-th POST matches the k-th isend; the copy goes on the comm's stream into
//            the imported allocation, and the request completes (and DONE is sent) once the
//            copy's event has completed. Copies of successive sends overlap on the stream.
//            Where the allocation cannot be mapped now (cache_acquire), or the POST says it
//            cannot be mapped at all (kHost), the copy goes into a memfd instead, passed in
//            DATA in DONE's place.
//  receiver  a DATA completes its receive once the copy in from the memfd has completed.
// A comm with requests that sees no progress for ZCX_TIMEOUT fails them, naming the peer.
#include "common/clock.h"
#include "common/config_vars.h"
#include "common/log.h"
#include "common/wire.h"
#include "cuda_ipc/cuda_ipc.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace zcx::cuda_ipc {
namespace {

Status fail(Comm* c, Status s, const char* what) {
  std::string msg = "cuda_ipc " + std::string(c->is_send ? "send to " : "receive from ") +
                    peer_name(c) + ": " + what;
  c->error.record(s, msg);
  return set_error(s, kLogCuda, "%s", msg.c_str());
}

Status on_ack(Comm* c, wire::Reader& r) {
  uint32_t code = r.u32();
  if (!r.ok() || code != kAckOk)
    return fail(c, Status::kAuth, "the peer refused the connection (job secret or version)");
  c->acked = true;
  return Status::kSuccess;
}

Status on_post(Comm* c, wire::Reader& r, std::vector<UniqueFd>* fds) {
  uint64_t seq = 0;
  PostedBuffer p;
  p.fds = std::move(*fds);
  if (!c->acked || !post_read(r, &seq, &p) || seq != c->next_post)
    return fail(c, Status::kProtocol, "malformed or out-of-order POST");
  ++c->next_post;
  c->posts.push_back(std::move(p));
  return Status::kSuccess;
}

// The oldest receive that no DONE or DATA has answered yet, if it is `seq` and holds `size`.
Request* answered_receive(Comm* c, uint64_t seq, uint64_t size) {
  auto it = std::find_if(c->queue.begin(), c->queue.end(),
                         [](Request* q) { return !q->done && !q->filling; });
  if (it == c->queue.end() || (*it)->seq != seq || size > (*it)->cap) return nullptr;
  return *it;
}

Status on_done(Comm* c, wire::Reader& r) {
  uint64_t seq = r.u64(), size = r.u64();
  Request* q = r.ok() ? answered_receive(c, seq, size) : nullptr;
  if (q == nullptr) return fail(c, Status::kProtocol, "DONE that matches no posted receive");
  q->got = size;
  q->done = true;
  return Status::kSuccess;
}

// r's event after its copies on the comm's stream: one of the comm's spare events, else a
// new one (freed requests give theirs back, so a steady stream of messages creates no
// events, as UCX's and NCCL's pools keep theirs). The calling thread's device must be the
// comm's.
Status record_event(Comm* c, Request* r) {
  const CudaApi* api = c->ctx->api;
  if (!c->spare_events.empty()) {
    r->event = c->spare_events.back();
    c->spare_events.pop_back();
  } else {
    ZCX_CUDACHECK(api->event_create_with_flags(&r->event, cudaEventDisableTiming));
  }
  ZCX_CUDACHECK(api->event_record(r->event, c->stream));
  return Status::kSuccess;
}

// A copy of r's bytes on the comm's stream (out of a send, or into a receive), then r's event.
Status copy_and_record(Comm* c, Request* r, void* to, const void* from, size_t n) {
  CudaDeviceGuard guard(c->device);
  ZCX_TRY(guard.status());
  ZCX_CUDACHECK(c->ctx->api->copy_async(to, from, n, cudaMemcpyDefault, c->stream));
  return record_event(c, r);
}

// The send's bytes into each mapped piece in turn (the first from its offset), then r's event.
Status copy_pieces_and_record(Comm* c, Request* r) {
  CudaDeviceGuard guard(c->device);
  ZCX_TRY(guard.status());
  const auto* src = static_cast<const uint8_t*>(r->src);
  size_t at = 0;
  for (size_t i = 0; i < r->mapped.size() && at < r->size; ++i) {
    const Export& e = r->dst[i];
    const size_t n = std::min<size_t>(e.size - e.offset, r->size - at);
    ZCX_CUDACHECK(c->ctx->api->copy_async(r->mapped[i] + e.offset, src + at, n,
                                          cudaMemcpyDefault, c->stream));
    at += n;
  }
  return record_event(c, r);
}

void release_pieces(Comm* c, Request* r) {
  for (size_t i = 0; i < r->mapped.size(); ++i) cache_release(c->peer.pid, r->dst[i]);
  r->mapped.clear();
  r->dst.clear();
}

// Maps the pieces the send reaches. Where the driver will not map one now (a reused range
// while a stream is held), none stays mapped: the caller goes through host memory.
Status map_pieces(Comm* c, Request* r, const PostedBuffer& p) {
  size_t at = 0, fd = 0;
  for (const Export& e : p.pieces) {
    if (at >= r->size) break;
    uint8_t* base = nullptr;
    const int f = e.kind == ExportKind::kVmm ? p.fds[fd++].get() : -1;
    ZCX_TRY(cache_acquire(c->peer.pid, c->device, e, f, &base));
    if (base == nullptr) {
      release_pieces(c, r);
      return Status::kSuccess;
    }
    r->dst.push_back(e);
    r->mapped.push_back(base);
    at += e.size - e.offset;
  }
  return Status::kSuccess;
}

void unmap_bounce(Request* r) {
  r->bounce.reset();
  r->bounce_fd.reset();
}

// DATA: the bytes of the oldest open receive, in the attached memfd; copied in on the stream.
Status on_data(Comm* c, wire::Reader& r, const std::vector<UniqueFd>& fds) {
  uint64_t seq = r.u64(), size = r.u64();
  Request* q = r.ok() && size > 0 ? answered_receive(c, seq, size) : nullptr;
  if (q == nullptr || fds.size() != 1)
    return fail(c, Status::kProtocol, "DATA that matches no posted receive, or without a memfd");
  const int fd = fds.front().get();
  if (!ok(memfd_check(fd, size, kLogCuda, true)))
    return fail(c, Status::kProtocol,
                ("DATA without a sealed memfd of its size: " + std::string(last_error())).c_str());
  if (!ok(q->bounce.map(fd, size, false)))
    return fail(c, Status::kSystem, "mmap of a DATA memfd failed");
  q->got = size;
  q->filling = true;
  return copy_and_record(c, q, q->buf, q->bounce.data(), size);
}

Status read_packets(Comm* c) {
  for (;;) {
    uint8_t buf[kMaxPacket];
    size_t len = 0;
    std::vector<UniqueFd> fds;
    Status st = packet_recv_fds(c->sock.get(), buf, sizeof buf, &len, &fds);
    if (st == Status::kInProgress) return Status::kSuccess;
    if (!ok(st)) {
      c->closed = last_error();
      return Status::kSuccess;
    }
    c->last_progress_ns = now_ns();
    wire::Reader r(buf, len);
    uint32_t magic = r.u32();
    if (c->is_send && magic == kAckMagic) st = on_ack(c, r);
    else if (c->is_send && magic == kPostMagic) st = on_post(c, r, &fds);
    else if (!c->is_send && magic == kDoneMagic) st = on_done(c, r);
    else if (!c->is_send && magic == kDataMagic) st = on_data(c, r, fds);
    else st = fail(c, Status::kProtocol, "unknown control packet");
    ZCX_TRY(st);
  }
}

// The receive buffer could not be mapped: the bytes go to a memfd, which DATA passes on.
Status start_bounce(Comm* c, Request* r) {
  Status st = memfd_create_reserved(r->size, "a send through host memory", kLogCuda,
                                    &r->bounce_fd, true);
  if (ok(st)) st = r->bounce.map(r->bounce_fd.get(), r->size);
  if (!ok(st)) return fail(c, st, last_error());
  return copy_and_record(c, r, r->bounce.data(), r->src, r->size);
}

Status start_copy(Comm* c, Request* r) {
  PostedBuffer p = std::move(c->posts.front());
  c->posts.pop_front();
  if (r->size > p.cap)
    return fail(c, Status::kInvalidArg, "the peer's receive buffer is smaller than the send");
  r->copying = true;
  if (r->size == 0) return Status::kSuccess;  // nothing to copy; the event stays null
  if (p.pieces.front().kind == ExportKind::kHost) return start_bounce(c, r);
  ZCX_TRY(map_pieces(c, r, p));
  if (r->mapped.empty()) return start_bounce(c, r);
  return copy_pieces_and_record(c, r);
}

// kInProgress while the copy runs or DONE does not fit in the socket yet.
Status finish_copy(Comm* c, Request* r) {
  if (r->event != nullptr) {
    cudaError_t e = c->ctx->api->event_query(r->event);
    if (e == cudaErrorNotReady) return Status::kInProgress;
    ZCX_TRY(cuda_check(e, "cudaEventQuery(cuda_ipc copy)"));
  }
  uint8_t buf[32];
  wire::Writer w(buf, sizeof buf);
  w.u32(r->bounce_fd.valid() ? kDataMagic : kDoneMagic);
  w.u64(r->seq);
  w.u64(r->size);
  Status st = packet_send(c->sock.get(), buf, w.size(), r->bounce_fd.get());
  if (st == Status::kInProgress) return st;
  if (!ok(st)) return fail(c, Status::kRemote, last_error());
  unmap_bounce(r);  // the receiver holds the memfd now
  r->done = true;
  c->last_progress_ns = now_ns();
  return Status::kSuccess;
}

Status progress_sends(Comm* c) {
  for (Request* r : c->queue) {
    if (r->done) continue;
    if (!r->copying) {
      if (c->posts.empty()) break;
      // A copy that cannot start (an import the driver refuses) fails the comm: a later
      // progress call must not send DONE for bytes that were never copied.
      Status st = start_copy(c, r);
      if (!ok(st)) return c->error.has() ? st : fail(c, st, last_error());
    }
    Status st = finish_copy(c, r);
    if (st == Status::kInProgress) break;  // DONE packets leave in order
    ZCX_TRY(st);
  }
  return Status::kSuccess;
}

// Receives whose DATA is being copied in: done once their copy has completed.
Status progress_fills(Comm* c) {
  for (Request* r : c->queue) {
    if (!r->filling || r->done) continue;
    cudaError_t e = c->ctx->api->event_query(r->event);
    if (e == cudaErrorNotReady) continue;
    ZCX_TRY(cuda_check(e, "cudaEventQuery(cuda_ipc copy in)"));
    unmap_bounce(r);
    r->done = true;
    c->last_progress_ns = now_ns();
  }
  return Status::kSuccess;
}

Status check_idle(Comm* c) {
  if (c->queue.empty()) {
    c->last_progress_ns = now_ns();
    return Status::kSuccess;
  }
  if (now_ns() - c->last_progress_ns < c->timeout_ms * 1000000) return Status::kSuccess;
  return fail(c, Status::kTimeout, "no progress within ZCX_TIMEOUT");
}

Status progress(Comm* c) {
  if (c->error.has()) return c->error.raise();
  if (c->closed.empty()) ZCX_TRY(read_packets(c));
  ZCX_TRY(c->is_send ? progress_sends(c) : progress_fills(c));
  // Scanned only once the peer has closed: progress runs at every poll. A receive whose
  // DATA arrived has its bytes.
  if (!c->closed.empty() && std::any_of(c->queue.begin(), c->queue.end(), [](Request* q) {
        return !q->done && !q->filling;
      }))
    return fail(c, Status::kRemote, c->closed.c_str());
  return check_idle(c);
}

// r's event goes back to the comm's spares (at most kMaxRequests: one per request).
void request_free(Comm* c, Request* r) {
  if (r->event != nullptr) c->spare_events.push_back(r->event);
  release_pieces(c, r);
  delete r;
}

}  // namespace

Status isend(Comm* c, const void* data, size_t size, Request** out) {
  *out = nullptr;
  if (c->error.has()) return c->error.raise();
  if (c->queue.size() >= static_cast<size_t>(kMaxRequests)) return Status::kSuccess;  // retry
  auto* r = new (std::nothrow) Request;
  if (r == nullptr) return set_error(Status::kNoMemory, kLogCuda, "cuda_ipc isend: no memory");
  r->comm = c;
  r->is_send = true;
  r->src = data;
  r->size = size;
  r->seq = c->next_seq++;
  c->queue.push_back(r);
  *out = r;
  return Status::kSuccess;
}

Status irecv(Comm* c, void* data, size_t cap, Request** out) {
  *out = nullptr;
  if (c->error.has()) return c->error.raise();
  if (c->queue.size() >= static_cast<size_t>(kMaxRequests)) return Status::kSuccess;  // retry
  PostedBuffer p;
  p.pieces.assign(1, Export{ExportKind::kNone});
  if (cap > 0) ZCX_TRY(export_buffer(data, cap, &p));
  p.cap = cap;
  uint8_t buf[kMaxPacket];
  const size_t len = post_write(c->next_seq, p, buf);
  int fds[kMaxPieces];
  for (size_t i = 0; i < p.fds.size(); ++i) fds[i] = p.fds[i].get();
  Status st = packet_send_fds(c->sock.get(), buf, len, fds, p.fds.size());
  if (st == Status::kInProgress) return Status::kSuccess;  // socket full: retry
  if (!ok(st)) return fail(c, Status::kRemote, last_error());
  auto* r = new (std::nothrow) Request;
  if (r == nullptr) return fail(c, Status::kNoMemory, "out of memory after a POST");
  r->comm = c;
  r->buf = data;
  r->cap = cap;
  r->seq = c->next_seq++;
  c->queue.push_back(r);
  *out = r;
  return Status::kSuccess;
}

Status test(Request* r, int* done, size_t* sizes) {
  Comm* c = r->comm;
  *done = 0;
  if (!r->done) {
    // A failure after r completed in this call (a later message) waits for the next test.
    Status st = progress(c);
    if (!r->done) return st;
  }
  *done = 1;
  if (sizes != nullptr) sizes[0] = r->is_send ? r->size : r->got;
  c->queue.erase(std::find(c->queue.begin(), c->queue.end(), r));
  request_free(c, r);
  return Status::kSuccess;
}

// Close with requests in flight: copies into the peer's memory (or out of, or into, a memfd)
// must finish before the mapping can go, so wait for their events (bounded by ZCX_TIMEOUT),
// then free everything.
void comm_drop_requests(Comm* c) {
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  for (Request* r : c->queue) {
    while (r->event != nullptr && c->ctx->api->event_query(r->event) == cudaErrorNotReady &&
           !dl.expired())
      sched_yield();
    request_free(c, r);
  }
  c->queue.clear();
  c->posts.clear();  // and their descriptors
}

Comm::~Comm() {
  comm_drop_requests(this);
  for (cudaEvent_t e : spare_events) (void)ctx->api->event_destroy(e);
  if (stream != nullptr && ctx->api != nullptr) (void)ctx->api->stream_destroy(stream);
  if (is_send) cache_forget(peer.pid);
}

}  // namespace zcx::cuda_ipc
