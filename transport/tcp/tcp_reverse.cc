// Duplex: the acceptor of a connection sends back over the same sockets (connect_reverse)
// and the connector picks that direction up (accept_reverse). A ping-pong over two one-way
// connections draws a pure ACK for every message on each socket; over one socket the reply
// carries the ACK (docs/PERFORMANCE.md, tcp). The reverse direction opens with a 128-byte
// reverse hello on socket 0 (docs/WIRE.md); after it, each direction is its own comm over
// its own duplicates of the fds, so either comm closes without disturbing the other.
#include "common/config_vars.h"
#include "tcp/tcp.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace zcx::tcp {
namespace {

// The reverse direction's layout: the connection's sockets, the sender's own sizes (as a
// connector's hello gives its own).
Layout reverse_layout(const Comm* recv) {
  return Layout{recv->layout.nsocks, config_inline(), config_chunk()};
}

void reverse_hello_write(const Context* ctx, const Layout& l, uint8_t* out) {
  wire::Writer w(out, kHelloBytes);
  w.u32(kReverseMagic);
  w.u16(kWireVersion);
  w.u8(static_cast<uint8_t>(l.nsocks));
  w.u8(0);  // reserved
  w.u64(ctx->self.secret);
  w.u32(static_cast<uint32_t>(ctx->self.rank));
  w.u32(static_cast<uint32_t>(ctx->pid));
  w.u64(l.inline_max);
  w.u64(l.chunk);
  put_host(w, ctx->self.host);
}

// Checks a reverse hello that arrived on send comm c's socket 0; on failure *why says what
// was wrong (never the secret).
bool reverse_hello_read(const Comm* c, const uint8_t* in, zcx_peer_info_t* peer, Layout* l,
                        const char** why) {
  wire::Reader r(in, kHelloBytes);
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  l->nsocks = r.u8();
  (void)r.u8();
  uint64_t secret = r.u64();
  peer->rank = static_cast<int32_t>(r.u32());
  peer->pid = static_cast<int32_t>(r.u32());
  l->inline_max = r.u64();
  l->chunk = r.u64();
  get_host(r, peer->host);
  *why = !r.ok() ? "short reverse hello"
         : magic != kReverseMagic ? "not a reverse hello (wrong magic)"
         : version != kWireVersion ? "wire version mismatch"
         : !same_secret(secret, c->ctx->self.secret) ? "wrong job secret"
         : l->nsocks != c->layout.nsocks ? "socket count differs from the connection's"
         : peer->rank != c->peer.rank || peer->pid != c->peer.pid ? "sent by another process"
         : l->inline_max > kMaxInline ? "bad inline size"
         : l->chunk < 4096 || l->chunk > (size_t{1} << 30) ? "bad chunk size"
         : nullptr;
  return *why == nullptr;
}

Status dup_socks(const Comm* c, UniqueFd* out) {
  for (int i = 0; i < c->layout.nsocks; ++i) {
    out[i] = UniqueFd(fcntl(c->socks[i].fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!out[i].valid())
      return set_error(Status::kSystem, kLogTcp, "tcp: cannot duplicate a socket of the "
                       "connection with %s: %s", c->peer_text.c_str(), errno_text(errno));
  }
  return Status::kSuccess;
}

}  // namespace

Status ep_connect_reverse(Comm* recv, Comm** out) {
  *out = nullptr;
  if (recv->error.has()) return recv->error.raise();
  if (recv->reversed)
    return set_error(Status::kInvalidUsage, kLogTcp, "tcp connect_reverse: the connection "
                     "with %s already carries a reverse direction", recv->peer_text.c_str());
  const Layout layout = reverse_layout(recv);
  if (recv->reverse_done == 0) reverse_hello_write(recv->ctx, layout, recv->reverse_hello.data());
  while (recv->reverse_done < kHelloBytes) {
    ssize_t n = send(recv->socks[0].fd.get(), recv->reverse_hello.data() + recv->reverse_done,
                     kHelloBytes - recv->reverse_done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Status::kSuccess;  // later
    if (n <= 0)
      return comm_fail(recv, Status::kRemote, "tcp reverse handshake with %s failed: %s",
                       recv->peer_text.c_str(), errno_text(errno));
    recv->reverse_done += static_cast<size_t>(n);
  }
  std::array<UniqueFd, kMaxSocks> fds;
  ZCX_TRY(dup_socks(recv, fds.data()));
  recv->reversed = true;
  *out = comm_create(recv->ctx, true, recv->peer, layout, fds.data()).release();
  return Status::kSuccess;
}

// Reads no further than the reverse hello: what follows it is the recv comm's.
Status ep_accept_reverse(Comm* send_comm, Comm** out) {
  Comm* c = send_comm;
  *out = nullptr;
  if (c->error.has()) return c->error.raise();
  if (c->reversed)
    return set_error(Status::kInvalidUsage, kLogTcp, "tcp accept_reverse: the reverse "
                     "direction of the connection with %s was accepted already",
                     c->peer_text.c_str());
  while (c->reverse_done < kHelloBytes) {
    ssize_t n = recv(c->socks[0].fd.get(), c->reverse_hello.data() + c->reverse_done,
                     kHelloBytes - c->reverse_done, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Status::kSuccess;  // not yet
    if (n <= 0)
      return comm_fail(c, Status::kRemote, "tcp connection with %s %s before it sent back "
                       "over it; is the peer alive?", c->peer_text.c_str(),
                       n == 0 ? "closed" : errno_text(errno));
    c->reverse_done += static_cast<size_t>(n);
  }
  zcx_peer_info_t peer{};
  Layout layout;
  const char* why = nullptr;
  if (!reverse_hello_read(c, c->reverse_hello.data(), &peer, &layout, &why))
    return comm_fail(c, Status::kProtocol, "tcp connection with %s: bad reverse hello (%s)",
                     c->peer_text.c_str(), why);
  std::array<UniqueFd, kMaxSocks> fds;
  ZCX_TRY(dup_socks(c, fds.data()));
  c->reversed = true;
  *out = comm_create(c->ctx, false, peer, layout, fds.data()).release();
  return Status::kSuccess;
}

}  // namespace zcx::tcp
