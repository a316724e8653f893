// The data path: message layout, the request pool, and the per-socket send/receive state
// machines that test() drives. Sockets are non-blocking; each call moves what the kernel
// takes (at most kSocketBudget bytes per socket) and returns.
#include "common/clock.h"
#include "common/config_vars.h"
#include "tcp/tcp.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the tcp message header is written in host order, which is little-endian");

namespace zcx::tcp {

size_t stripe_bytes(const Layout& l, size_t size, int s) {
  if (size <= l.inline_max) return s == 0 ? size : 0;
  size_t ns = static_cast<size_t>(l.nsocks), us = static_cast<size_t>(s);
  size_t nchunks = (size + l.chunk - 1) / l.chunk;
  if (us >= nchunks) return 0;
  size_t count = (nchunks - 1 - us) / ns + 1;
  size_t bytes = count * l.chunk;
  if ((nchunks - 1) % ns == us) bytes -= nchunks * l.chunk - size;  // short last chunk
  return bytes;
}

int stripe_iov(const Layout& l, char* base, size_t size, int s, size_t off, iovec* iov,
               int max) {
  if (size <= l.inline_max) {
    if (s != 0 || off >= size) return 0;
    iov[0] = {base + off, size - off};
    return 1;
  }
  size_t ns = static_cast<size_t>(l.nsocks);
  size_t nchunks = (size + l.chunk - 1) / l.chunk;
  size_t ci = off / l.chunk, within = off % l.chunk;
  int n = 0;
  for (; n < max; ++n, ++ci, within = 0) {
    size_t gc = static_cast<size_t>(s) + ci * ns;
    if (gc >= nchunks) break;
    size_t start = gc * l.chunk;
    size_t len = std::min(l.chunk, size - start);
    if (within >= len) break;  // off is at (or past) the end of this socket's part
    iov[n] = {base + start + within, len - within};
  }
  return n;
}

std::string describe_peer(const zcx_peer_info_t& p) {
  char buf[160];
  snprintf(buf, sizeof buf, "peer rank %d (host %s, pid %d)", p.rank, p.host, p.pid);
  return buf;
}

namespace {

// Whether the far end of connected socket fd is on this host (loopback or an own address).
bool peer_is_this_host(const Context* ctx, int fd) {
  SockAddr a;
  a.len = sizeof a.storage;
  if (getpeername(fd, a.sa(), &a.len) != 0) return false;
  return sockaddr_is_this_host(a, ctx->own_addrs);
}

std::string send_bound_text(size_t send_max) {
  return send_max == SIZE_MAX ? "" : ", at most " + std::to_string(send_max) + " B per sendmsg";
}

}  // namespace

std::unique_ptr<Comm> comm_create(Context* ctx, bool is_send, const zcx_peer_info_t& peer,
                                  const Layout& layout, UniqueFd* fds) {
  auto c = std::make_unique<Comm>();
  c->tag = is_send ? kSendTag : kRecvTag;
  c->is_send = is_send;
  c->ctx = ctx;
  c->peer = peer;
  c->peer_text = describe_peer(peer);
  c->layout = layout;
  for (int i = 0; i < layout.nsocks; ++i) c->socks[i].fd = std::move(fds[i]);
  if (is_send) c->send_max = config_send_max(peer_is_this_host(ctx, c->socks[0].fd.get()));
  c->pool.resize(kMaxRequests);
  c->free_reqs.reserve(kMaxRequests);
  for (int i = kMaxRequests - 1; i >= 0; --i) c->free_reqs.push_back(i);
  c->ring.resize(is_send ? kMaxRequests : kRecvMsgSlots);
  if (!is_send) {
    c->pending.resize(kMaxRequests);
    c->stage.resize(kStageBytes);
  }
  c->last_progress_ns = now_ns();
  c->timeout_ns = params::timeout_ms() * 1000000;
  ZCX_INFO(kLogTcp, "tcp %s comm with %s up: %d sockets, inline %zu, chunk %zu%s",
           is_send ? "send" : "recv", c->peer_text.c_str(), layout.nsocks, layout.inline_max,
           layout.chunk, send_bound_text(c->send_max).c_str());
  return c;
}

Request* request_get(Comm* c) {
  if (c->free_reqs.empty()) return nullptr;
  Request* r = &c->pool[static_cast<size_t>(c->free_reqs.back())];
  c->free_reqs.pop_back();
  r->tag = kRequestTag;
  r->comm = c;
  r->assigned = 0;
  r->posted_ns = 0;
  r->taken.fill(false);
  r->got.fill(0);
  return r;
}

void request_put(Request* r) {
  Comm* c = r->comm;
  r->tag = kDeadTag;
  c->free_reqs.push_back(static_cast<int>(r - c->pool.data()));
}

Status comm_fail(Comm* c, Status s, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!c->error.has()) {
    c->error.record(s, msg);
    ZCX_WARN(kLogTcp, "%s", msg);
  }
  return c->error.raise();
}

namespace {

// Classifies a failed send/recv: the would-block cases are not errors.
bool would_block(ssize_t n) { return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK); }

Status io_failure(Comm* c, int s, ssize_t n, const char* op) {
  if (n == 0)
    return comm_fail(c, Status::kRemote,
                     "%s closed the connection or died during %s (end of stream on socket %d "
                     "of %d)", c->peer_text.c_str(), op, s, c->layout.nsocks);
  int err = errno;
  return comm_fail(c, Status::kRemote, "%s closed the connection or died during %s: %s "
                   "(socket %d of %d)", c->peer_text.c_str(), op, errno_text(err), s,
                   c->layout.nsocks);
}

// A socket finished its part of the oldest message it worked on.
void socket_done_with(Comm* c, Sock& sk) {
  Message& m = c->ring[sk.cursor % c->ring.size()];
  ++sk.cursor;
  sk.off = 0;
  if (--m.socks_left == 0) --m.req->left;
  while (c->head < c->tail && c->ring[c->head % c->ring.size()].socks_left == 0) ++c->head;
}

void write_header(uint8_t* h, uint64_t seq_number, const Message& m) {
  uint32_t magic = kMsgMagic, seq = static_cast<uint32_t>(seq_number), flags = 0;
  uint64_t size = m.size;
  int32_t tag = m.tag;
  memcpy(h, &magic, 4);
  memcpy(h + 4, &seq, 4);
  memcpy(h + 8, &size, 8);
  memcpy(h + 16, &tag, 4);
  memcpy(h + 20, &flags, 4);
}

// Bytes socket s sends for message m (socket 0: header included).
size_t send_part(const Comm* c, const Message& m, int s) {
  return (s == 0 ? kHeaderBytes : 0) + stripe_bytes(c->layout, m.size, s);
}

constexpr int kBatchMsgs = 16;
constexpr size_t kBatchBytes = 256 * 1024;
// Bytes one socket moves in one progress call, at most. Without a bound, a peer that keeps
// the socket full kept one test() inside until its whole message was through (seconds for
// gigabytes), while the caller's other connections, its deadlines and an abort from
// another thread waited.
constexpr size_t kSocketBudget = size_t{2} << 20;

// The first entries of iov[0..n) that hold `most` bytes (the last one shortened); their count.
int clip_iov(iovec* iov, int n, size_t most) {
  for (int i = 0; i < n; ++i) {
    if (iov[i].iov_len >= most) {
      iov[i].iov_len = most;
      return i + 1;
    }
    most -= iov[i].iov_len;
  }
  return n;
}

// Gathers what socket s has to send: the rest of its current message and, on socket 0,
// small messages queued behind it, so one sendmsg carries many. Returns the iovec count.
// It stops near c->send_max bytes, which the caller clips to exactly: a striped part needs
// send_max / chunk + 2 iovecs (partial chunks at both ends), not all kIovMax that fit.
int gather(Comm* c, int s, iovec* iov, uint8_t (*hdrs)[kHeaderBytes]) {
  Sock& sk = c->socks[s];
  const size_t room = c->send_max / c->layout.chunk + 2;
  int n = 0;
  size_t bytes = 0;
  for (int k = 0; k < kBatchMsgs && sk.cursor + k < c->tail; ++k) {
    const Message& m = c->ring[(sk.cursor + k) % c->ring.size()];
    if (k > 0 && (s != 0 || m.size > c->layout.inline_max || bytes + m.size > kBatchBytes ||
                  bytes >= c->send_max || n + 2 > kIovMax))
      break;
    size_t off = k == 0 ? sk.off : 0;
    size_t hdr = s == 0 ? kHeaderBytes : 0;
    if (off < hdr) {
      write_header(hdrs[k], sk.cursor + k, m);
      iov[n++] = {hdrs[k] + off, hdr - off};
    }
    n += stripe_iov(c->layout, m.data, m.size, s, off > hdr ? off - hdr : 0, iov + n,
                    static_cast<int>(std::min(room, static_cast<size_t>(kIovMax - n))));
    bytes += send_part(c, m, s) - off;
  }
  return n;
}

// Credits `sent` bytes to socket s's messages in order, finishing the ones fully sent.
void credit(Comm* c, int s, size_t sent) {
  Sock& sk = c->socks[s];
  while (sk.cursor < c->tail) {
    size_t total = send_part(c, c->ring[sk.cursor % c->ring.size()], s);
    size_t take = std::min(sent, total - sk.off);
    sk.off += take;
    sent -= take;
    if (sk.off < total) return;
    socket_done_with(c, sk);
  }
}

Status send_socket(Comm* c, int s) {
  Sock& sk = c->socks[s];
  iovec iov[kIovMax + 1];
  uint8_t hdrs[kBatchMsgs][kHeaderBytes];
  for (size_t moved = 0; sk.cursor < c->tail && moved < kSocketBudget;) {
    if (sk.off == send_part(c, c->ring[sk.cursor % c->ring.size()], s)) {
      socket_done_with(c, sk);  // nothing for this socket in that message
      continue;
    }
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<size_t>(clip_iov(iov, gather(c, s, iov, hdrs), c->send_max));
    ssize_t got = sendmsg(sk.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    if (would_block(got)) return Status::kSuccess;
    if (got <= 0) return io_failure(c, s, got < 0 ? got : -1, "send");
    credit(c, s, static_cast<size_t>(got));
    moved += static_cast<size_t>(got);
    ++c->moves;
  }
  return Status::kSuccess;
}

// Matches a parsed header to the first pending receive; creates message `c->tail`.
Status match_header(Comm* c) {
  uint32_t magic, seq, flags;
  uint64_t size;
  int32_t tag;
  memcpy(&magic, c->hdr, 4);
  memcpy(&seq, c->hdr + 4, 4);
  memcpy(&size, c->hdr + 8, 8);
  memcpy(&tag, c->hdr + 16, 4);
  memcpy(&flags, c->hdr + 20, 4);
  if (magic != kMsgMagic || seq != static_cast<uint32_t>(c->tail) || flags != 0 ||
      size > kMaxMessage)
    return comm_fail(c, Status::kProtocol, "malformed message header from %s (magic 0x%08x, "
                     "seq %u expected %u, size %llu); the stream is out of sync",
                     c->peer_text.c_str(), magic, seq, static_cast<uint32_t>(c->tail),
                     static_cast<unsigned long long>(size));
  Request* r = c->pending[c->pend_head];
  int i = 0;
  while (i < r->n && (r->taken[i] || r->tags[i] != tag)) ++i;
  if (i == r->n)
    return comm_fail(c, Status::kInvalidUsage, "message with tag %d from %s matches no free "
                     "buffer of the pending receive (%d buffers)", tag, c->peer_text.c_str(),
                     r->n);
  if (size > r->cap[i])
    return comm_fail(c, Status::kInvalidUsage, "message truncated: %s sent %llu bytes into a "
                     "receive buffer of %zu bytes", c->peer_text.c_str(),
                     static_cast<unsigned long long>(size), r->cap[i]);
  r->taken[i] = true;
  r->got[i] = size;
  Message& m = c->ring[c->tail % c->ring.size()];
  m = Message{r->data[i], size, tag, r, c->layout.nsocks};
  ++c->tail;
  if (++r->assigned == r->n) {
    c->pend_head = (c->pend_head + 1) % c->pending.size();
    --c->pend_count;
  }
  return Status::kSuccess;
}

size_t staged(const Comm* c) { return c->stage_end - c->stage_begin; }

// Reads what socket 0 has into the staging buffer; *got tells whether anything came.
Status stage_fill(Comm* c, bool* got, size_t* moved) {
  *got = false;
  if (c->stage_begin > 0) {
    memmove(c->stage.data(), c->stage.data() + c->stage_begin, staged(c));
    c->stage_end -= c->stage_begin;
    c->stage_begin = 0;
  }
  for (;;) {
    ssize_t n = recv(c->socks[0].fd.get(), c->stage.data() + c->stage_end,
                     c->stage.size() - c->stage_end, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (would_block(n)) return Status::kSuccess;
    if (n <= 0) return io_failure(c, 0, n, "receive");
    c->stage_end += static_cast<size_t>(n);
    *moved += static_cast<size_t>(n);
    ++c->moves;
    *got = true;
    return Status::kSuccess;
  }
}

// Socket 0 takes the next header once a receive buffer and a ring slot wait for it.
Status recv_header(Comm* c, bool* stalled, size_t* moved) {
  *stalled = c->pend_count == 0 || c->tail - c->head >= c->ring.size();
  if (*stalled) return Status::kSuccess;
  if (staged(c) < kHeaderBytes) {
    bool got = false;
    ZCX_TRY(stage_fill(c, &got, moved));
    if (staged(c) < kHeaderBytes) {
      *stalled = true;
      return Status::kSuccess;
    }
  }
  memcpy(c->hdr, c->stage.data() + c->stage_begin, kHeaderBytes);
  c->stage_begin += kHeaderBytes;
  return match_header(c);
}

// Moves staged bytes into socket 0's part of message m.
void unstage(Comm* c, Message& m, Sock& sk) {
  size_t want = std::min(staged(c), stripe_bytes(c->layout, m.size, 0) - sk.off);
  iovec iov[kIovMax];
  int n = stripe_iov(c->layout, m.data, m.size, 0, sk.off, iov, kIovMax);
  size_t done = 0;
  for (int i = 0; i < n && done < want; ++i) {
    size_t len = std::min(iov[i].iov_len, want - done);
    memcpy(iov[i].iov_base, c->stage.data() + c->stage_begin + done, len);
    done += len;
  }
  c->stage_begin += done;
  sk.off += done;
}

// Reads socket s's part of message m; *blocked when the socket has nothing more now.
// *moved counts the bytes read from the socket (never past kSocketBudget).
Status recv_part(Comm* c, int s, Message& m, bool* blocked, size_t* moved) {
  Sock& sk = c->socks[s];
  *blocked = false;
  if (s == 0 && staged(c) > 0) {
    unstage(c, m, sk);
    return Status::kSuccess;
  }
  if (s == 0 && stripe_bytes(c->layout, m.size, 0) - sk.off < kStageBelow) {
    ZCX_TRY(stage_fill(c, blocked, moved));
    *blocked = !*blocked;
    return Status::kSuccess;
  }
  iovec iov[kIovMax];
  int n = stripe_iov(c->layout, m.data, m.size, s, sk.off, iov, kIovMax);
  n = clip_iov(iov, n, kSocketBudget - *moved);
  msghdr mh{};
  mh.msg_iov = iov;
  mh.msg_iovlen = static_cast<size_t>(n);
  ssize_t got;
  do {
    got = recvmsg(sk.fd.get(), &mh, MSG_DONTWAIT);
  } while (got < 0 && errno == EINTR);
  if (would_block(got)) {
    *blocked = true;
    return Status::kSuccess;
  }
  if (got <= 0) return io_failure(c, s, got, "receive");
  sk.off += static_cast<size_t>(got);
  *moved += static_cast<size_t>(got);
  ++c->moves;
  return Status::kSuccess;
}

Status recv_socket(Comm* c, int s) {
  Sock& sk = c->socks[s];
  for (size_t moved = 0; moved < kSocketBudget;) {
    if (sk.cursor == c->tail) {
      if (s != 0) return Status::kSuccess;  // header not yet read by socket 0
      bool stalled = false;
      ZCX_TRY(recv_header(c, &stalled, &moved));
      if (stalled) return Status::kSuccess;
    }
    Message& m = c->ring[sk.cursor % c->ring.size()];
    if (sk.off == stripe_bytes(c->layout, m.size, s)) {
      socket_done_with(c, sk);
      continue;
    }
    bool blocked = false;
    ZCX_TRY(recv_part(c, s, m, &blocked, &moved));
    if (blocked) return Status::kSuccess;
  }
  return Status::kSuccess;  // more may wait: the next call goes on
}

}  // namespace

Status progress_send(Comm* c) {
  for (int s = 0; s < c->layout.nsocks; ++s) ZCX_TRY(send_socket(c, s));
  return Status::kSuccess;
}

Status progress_recv(Comm* c) {
  for (int s = 0; s < c->layout.nsocks; ++s) ZCX_TRY(recv_socket(c, s));
  return Status::kSuccess;
}

}  // namespace zcx::tcp
