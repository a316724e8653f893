// The two sides of connection set-up over the side channel: the connector sends its hello
// with its worker address and waits for the ack; the acceptor checks the hello, assigns the
// connection id and answers. Then the connector makes its UCP endpoint.
#include "ucx/ucx_ep_state.h"

#include "common/clock.h"
#include "common/config_vars.h"
#include "common/wire.h"
#include "ucx/ucx_config.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace zcx::ucx {
namespace {

bool timed_out(int64_t start_ns) {
  return now_ns() - start_ns > zcx::params::timeout_ms() * 1000000;
}

Status check_ack(const PendingConnect* pc, const Hello& ack, const Self& self) {
  PeerName peer{ack.who};
  if (ack.kind != 2 || ack.nonce != pc->nonce)
    return set_error(Status::kProtocol, kLog, "ucx connect to %s: unexpected handshake reply "
                     "from %s", pc->addr.to_string().c_str(), peer.text().c_str());
  if (ack.result != 0)
    return set_error(Status::kAuth, kLog, "ucx connect to %s: %s rejected the handshake (%s): "
                     "check that both belong to the same job (ZCX_SECRET) and zcx version",
                     pc->addr.to_string().c_str(), peer.text().c_str(),
                     zcx_status_string(static_cast<zcx_status_t>(ack.result)));
  if (ack.secret != self.secret)
    return set_error(Status::kAuth, kLog, "ucx connect to %s: %s presented a different job "
                     "secret: it belongs to another job", pc->addr.to_string().c_str(),
                     peer.text().c_str());
  if (ack.conn_id == 0 || ack.conn_id > kConnMask)
    return set_error(Status::kProtocol, kLog, "ucx connect: %s sent connection id %u, out of "
                     "range", peer.text().c_str(), ack.conn_id);
  return Status::kSuccess;
}

CommBase* make_comm(Ctx* ctx, UniqueFd sock, const zcx_peer_info_t& who, uint32_t conn_id,
                    bool is_send) {
  auto* c = new CommBase;
  c->ctx = ctx;
  c->ep_error = std::make_unique<EpError>();
  c->sock = std::move(sock);
  c->peer.info = who;
  c->conn_id = conn_id;
  c->is_send = is_send;
  c->last_activity_ns = now_ns();
  c->timeout_ms = zcx::params::timeout_ms();
  c->use_memh = ucx::params::use_memh.get();
  return c;
}

// Error mode PEER, so requests to a dead peer complete with an error. UCX 1.13's shared-
// memory transports cannot detect peer failure, so with UCX_TLS=posix,cma no lane qualifies
// ("unreachable"); then the endpoint is made without it and the side channel alone reports
// a dead peer (its socket closes when the process dies).
Status create_ep(CommBase* c, const std::string& address, ucp_ep_h* ep, EpError* box) {
  Ctx* ctx = c->ctx;
  ucs_status_t s = UCS_ERR_UNREACHABLE;
  for (ucp_err_handling_mode_t mode : {UCP_ERR_HANDLING_MODE_PEER, UCP_ERR_HANDLING_MODE_NONE}) {
    // Once UCX said no, ask again only in a new ctx (UCX logs an ERROR line for each try).
    if (mode == UCP_ERR_HANDLING_MODE_PEER && ctx->peer_mode_unreachable) continue;
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    params.err_mode = mode;
    params.err_handler = error_handler(box);
    s = ctx->api->ep_create(ctx->worker, &params, ep);
    if (s == UCS_OK) {
      if (mode == UCP_ERR_HANDLING_MODE_NONE)
        ZCX_INFO(kLog, "ucx: endpoint to %s without UCP peer-failure handling (these UCX "
                 "transports lack it); the side channel reports a dead peer",
                 c->peer.text().c_str());
      return Status::kSuccess;
    }
    if (s != UCS_ERR_UNREACHABLE) break;
    if (mode == UCP_ERR_HANDLING_MODE_PEER) ctx->peer_mode_unreachable = true;
  }
  *ep = nullptr;
  return set_error(Status::kRemote, kLog, "ucx: endpoint to %s failed: %s (check UCX_TLS: both "
                   "sides need a common transport)", c->peer.text().c_str(), ucs_text(ctx, s));
}

}  // namespace

size_t FrameReader::want() const {
  if (buf_.size() < kHelloBytes + 2) return kHelloBytes + 2;
  const auto* p = reinterpret_cast<const uint8_t*>(buf_.data()) + kHelloBytes;
  return kHelloBytes + 2 + (static_cast<size_t>(p[0]) | (static_cast<size_t>(p[1]) << 8));
}

Status FrameReader::read(int fd, const char* peer) {
  char tmp[1024];
  for (;;) {
    size_t target = want();
    if (target - kHelloBytes - 2 > kMaxWorkerAddress)
      return set_error(Status::kProtocol, kLog, "ucx handshake from %s: worker address of %zu "
                       "bytes, more than %zu", peer, target - kHelloBytes - 2, kMaxWorkerAddress);
    if (buf_.size() >= kHelloBytes + 2 && buf_.size() == target) return Status::kSuccess;
    size_t chunk = std::min(sizeof(tmp), target - buf_.size());
    ssize_t n = recv(fd, tmp, chunk, MSG_DONTWAIT);
    if (n > 0) {
      buf_.append(tmp, static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      return Status::kInProgress;
    } else {
      return set_error(Status::kRemote, kLog, "ucx handshake with %s: connection %s", peer,
                       n == 0 ? "closed by the peer" : errno_text(errno));
    }
  }
}

std::string frame_encode(const Hello& h, const std::string& worker_address) {
  std::string out = hello_encode(h);
  out.push_back(static_cast<char>(worker_address.size() & 0xff));
  out.push_back(static_cast<char>(worker_address.size() >> 8));
  return out + worker_address;
}

// ---- connector ----------------------------------------------------------------------------

Status connect_start(Ctx* ctx, const SockAddr& addr, uint32_t listen_id, uint64_t nonce,
                     PendingConnect** out) {
  auto pc = std::make_unique<PendingConnect>();
  pc->ctx = ctx;
  pc->addr = addr;
  pc->listen_id = listen_id;
  pc->nonce = nonce;
  pc->start_ns = now_ns();
  Status s = socket_connect_start(addr, &pc->sock);
  if (!ok(s))
    return set_error(s, kLog, "ucx connect to %s: %s", addr.to_string().c_str(), last_error());
  *out = pc.release();
  return Status::kSuccess;
}

namespace {

Status send_hello(PendingConnect* pc, const zcx_peer_info_t& self) {
  if (pc->hello_sent) return Status::kSuccess;
  Status s = socket_connect_done(pc->sock.get(), pc->addr);
  if (s == Status::kInProgress) return s;
  if (!ok(s)) return set_error(s, kLog, "ucx connect: %s (is the peer listening?)", last_error());
  Hello hello;
  hello.kind = 1;
  hello.secret = pc->ctx->self.secret;
  hello.nonce = pc->nonce;
  hello.conn_id = pc->listen_id;
  hello.who = self;
  hello.ucp_port = sockaddr_usable(pc->ctx) ? 1 : 0;  // "I would use your ucp_listener"
  std::string frame = frame_encode(hello, pc->ctx->worker_address);
  std::string where = pc->addr.to_string();
  s = socket_send_all(pc->sock.get(), frame.data(), frame.size(),
                      Deadline::after_ms(zcx::params::timeout_ms()), where.c_str());
  if (!ok(s)) return set_error(s, kLog, "ucx connect: %s", last_error());
  pc->hello_sent = true;
  return Status::kSuccess;
}

}  // namespace

// connect() returns the send comm as soon as the hello is on its way, without waiting for
// the acceptor to call accept (the contract). The comm is half-open until the ack arrives:
// isend then answers "retry later" (NULL request), and this function finishes the job.
Status connect_finish(PendingConnect* pc, const zcx_peer_info_t& self, SendComm** out) {
  Status s = send_hello(pc, self);
  if (s == Status::kInProgress) {
    if (!timed_out(pc->start_ns)) return Status::kSuccess;
    return set_error(Status::kTimeout, kLog, "ucx connect to %s: not connected within "
                     "ZCX_TIMEOUT (%lld ms)", pc->addr.to_string().c_str(),
                     static_cast<long long>(zcx::params::timeout_ms()));
  }
  ZCX_TRY(s);
  CommBase* c = make_comm(pc->ctx, UniqueFd(), pc->listener, 0, true);
  c->handshake = pc;
  *out = c;
  return Status::kSuccess;
}

Status handshake_progress(CommBase* c) {
  PendingConnect* pc = c->handshake;
  std::string where = pc->addr.to_string();
  Status s = pc->rx.read(pc->sock.get(), where.c_str());
  if (s == Status::kInProgress) {
    if (!timed_out(pc->start_ns)) return s;
    return set_error(Status::kTimeout, kLog, "ucx connect to %s: no handshake reply within "
                     "ZCX_TIMEOUT (%lld ms): is the peer calling accept?", where.c_str(),
                     static_cast<long long>(zcx::params::timeout_ms()));
  }
  ZCX_TRY(s);
  Hello ack;
  ZCX_TRY(hello_decode(pc->rx.bytes().data(), kHelloBytes, &ack));
  ZCX_TRY(check_ack(pc, ack, pc->ctx->self));
  c->peer.info = ack.who;
  c->conn_id = ack.conn_id;
  SockAddr ucp_addr = pc->addr;
  ucp_addr.set_port(ack.ucp_port);
  std::string address = pc->rx.address();
  c->sock = std::move(pc->sock);
  c->handshake = nullptr;
  connect_destroy(pc);
  c->last_activity_ns = now_ns();
  ZCX_INFO(kLog, "ucx: connected to %s at %s, connection %u", c->peer.text().c_str(),
           where.c_str(), c->conn_id);
  if (ack.ucp_port == 0 || !sockaddr_usable(c->ctx))
    return create_ep(c, address, &c->ep, c->ep_error.get());
  // Both: the sockaddr endpoint for large messages, the worker-address one for small ones.
  c->small_ep_error = std::make_unique<EpError>();
  ZCX_TRY(create_ep(c, address, &c->small_ep, c->small_ep_error.get()));
  c->sockaddr_min = ucx::params::sockaddr_min.get();
  return sockaddr_ep_create(c, ucp_addr);
}

void connect_destroy(PendingConnect* pc) { delete pc; }

// ---- acceptor -----------------------------------------------------------------------------

namespace {

Status check_hello(const ListenComm* lc, const Hello& hello, const Self& self) {
  PeerName peer{hello.who};
  if (hello.kind != 1 || hello.conn_id != lc->listen_id)
    return set_error(Status::kProtocol, kLog, "ucx accept on %s: %s sent a hello for another "
                     "listener or of the wrong kind", lc->addr.to_string().c_str(),
                     peer.text().c_str());
  if (hello.secret != self.secret)
    return set_error(Status::kAuth, kLog, "ucx accept on %s: %s presented a different job "
                     "secret (another job, or a stray connection): rejected",
                     lc->addr.to_string().c_str(), peer.text().c_str());
  return Status::kSuccess;
}

uint32_t next_conn_id(Ctx* ctx) {
  uint32_t id = ctx->next_conn_id;
  ctx->next_conn_id = id >= kConnMask ? 1 : id + 1;
  return id;
}

// Answers a hello: an accepting ack with our identity and worker address, or a rejection.
Status send_ack(Ctx* ctx, int fd, const Hello& hello, Status result, uint32_t conn_id,
                const zcx_peer_info_t& self) {
  Hello ack;
  ack.kind = 2;
  ack.result = static_cast<uint16_t>(result);
  ack.secret = ok(result) ? ctx->self.secret : 0;  // never echo a secret to a stranger
  ack.nonce = hello.nonce;
  ack.conn_id = conn_id;
  ack.who = self;
  ack.ucp_port = ok(result) && hello.ucp_port != 0 ? ctx->ucp_listener_port : 0;
  std::string frame = frame_encode(ack, ok(result) ? ctx->worker_address : std::string());
  PeerName peer{hello.who};
  return socket_send_all(fd, frame.data(), frame.size(),
                         Deadline::after_ms(zcx::params::timeout_ms()), peer.text().c_str());
}

}  // namespace

Status accept_finish(ListenComm* lc, Accepting* a, const zcx_peer_info_t& self, RecvComm** out) {
  Ctx* ctx = lc->ctx;
  std::string from = "connecting peer " + a->peer.to_string();
  Status s = a->rx.read(a->sock.get(), from.c_str());
  if (s == Status::kInProgress) {
    if (!timed_out(a->start_ns)) return Status::kSuccess;
    return set_error(Status::kTimeout, kLog, "ucx accept on %s: no handshake from %s within "
                     "ZCX_TIMEOUT", lc->addr.to_string().c_str(), from.c_str());
  }
  ZCX_TRY(s);
  Hello hello;
  ZCX_TRY(hello_decode(a->rx.bytes().data(), kHelloBytes, &hello));
  s = check_hello(lc, hello, ctx->self);
  if (!ok(s)) {
    std::string why = last_error();
    (void)send_ack(ctx, a->sock.get(), hello, s, 0, self);  // tell it why, best effort
    return set_error_quiet(s, "%s", why.c_str());
  }
  uint32_t conn_id = next_conn_id(ctx);
  ZCX_TRY(send_ack(ctx, a->sock.get(), hello, Status::kSuccess, conn_id, self));
  if (ctx->ucp_listener_port != 0 && hello.ucp_port != 0) sockaddr_expect(ctx, a->peer);
  *out = make_comm(ctx, std::move(a->sock), hello.who, conn_id, false);
  ZCX_INFO(kLog, "ucx: accepted %s on %s, connection %u", (*out)->peer.text().c_str(),
           lc->addr.to_string().c_str(), conn_id);
  return Status::kSuccess;
}

}  // namespace zcx::ucx
