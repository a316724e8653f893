// The two sides of connection set-up: the connector's endpoint + hello + wait for the ack,
// the acceptor's endpoint from a connection request + wait for the hello + ack.
#include "ucx/ucx_ep_state.h"

#include "common/clock.h"
#include "common/config_vars.h"

namespace zcx::ucx {
namespace {

ucp_err_handler_t error_handler(EpError* box) {
  ucp_err_handler_t h{};
  h.cb = ep_error_callback;
  h.arg = box;
  return h;
}

// Posts a send; *req is nullptr when UCX finished it at once.
Status post_send(Ctx* ctx, ucp_ep_h ep, const void* buf, size_t len, uint64_t tag,
                 void** req) {
  ucp_request_param_t param{};
  ucs_status_ptr_t p = ctx->api->tag_send_nbx(ep, buf, len, tag, &param);
  if (UCS_PTR_IS_ERR(p))
    return set_error(Status::kRemote, kLog, "ucx handshake send failed: %s",
                     ucs_text(ctx, UCS_PTR_STATUS(p)));
  *req = p;
  return Status::kSuccess;
}

Status post_recv(Ctx* ctx, void* buf, size_t len, uint64_t tag, void** req) {
  ucp_request_param_t param{};
  ucs_status_ptr_t p = ctx->api->tag_recv_nbx(ctx->worker, buf, len, tag, ~0ull, &param);
  if (UCS_PTR_IS_ERR(p) || p == nullptr)
    return set_error(Status::kSystem, kLog, "ucx: posting the handshake receive failed: %s",
                     ucs_text(ctx, UCS_PTR_STATUS(p)));
  *req = p;
  return Status::kSuccess;
}

// UCS_INPROGRESS, UCS_OK (with *len) or an error of a posted handshake receive.
ucs_status_t recv_status(Ctx* ctx, void* req, size_t* len) {
  ucp_tag_recv_info_t info{};
  ucs_status_t s = ctx->api->tag_recv_request_test(req, &info);
  if (s == UCS_OK) *len = info.length;
  return s;
}

void cancel_recv(Ctx* ctx, void*& req) {
  if (req == nullptr) return;
  if (ctx->api->request_check_status(req) == UCS_INPROGRESS)
    ctx->api->request_cancel(ctx->worker, req);
  ctx->api->request_free(req);
  req = nullptr;
}

bool timed_out(int64_t start_ns) { return now_ns() - start_ns > zcx::params::timeout_ms() * 1000000; }

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

CommBase* make_comm(Ctx* ctx, ucp_ep_h ep, std::unique_ptr<EpError> box,
                    const zcx_peer_info_t& who, uint32_t conn_id, bool is_send) {
  auto* c = new CommBase;
  c->ctx = ctx;
  c->ep = ep;
  c->ep_error = std::move(box);
  c->peer.info = who;
  c->conn_id = conn_id;
  c->is_send = is_send;
  c->last_activity_ns = now_ns();
  return c;
}

}  // namespace

// ---- connector ----------------------------------------------------------------------------

Status connect_start(Ctx* ctx, const SockAddr& addr, uint32_t listen_id, uint64_t nonce,
                     const zcx_peer_info_t& self, PendingConnect** out) {
  auto pc = std::make_unique<PendingConnect>();
  pc->ctx = ctx;
  pc->addr = addr;
  pc->nonce = nonce & ((1ull << kKindShift) - 1);
  pc->start_ns = now_ns();
  pc->ep_error = std::make_unique<EpError>();
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = addr.sa();
  params.sockaddr.addrlen = addr.len;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler = error_handler(pc->ep_error.get());
  ucs_status_t s = ctx->api->ep_create(ctx->worker, &params, &pc->ep);
  if (s != UCS_OK)
    return set_error(Status::kRemote, kLog, "ucx connect to %s failed: %s",
                     addr.to_string().c_str(), ucs_text(ctx, s));
  Hello hello;
  hello.kind = 1;
  hello.secret = ctx->self.secret;
  hello.nonce = pc->nonce;
  hello.who = self;
  pc->hello_buf = hello_encode(hello);
  Status st = post_recv(ctx, pc->ack_buf, sizeof(pc->ack_buf), ack_tag(pc->nonce), &pc->ack_req);
  if (ok(st))
    st = post_send(ctx, pc->ep, pc->hello_buf.data(), pc->hello_buf.size(),
                   hello_tag(listen_id), &pc->hello_req);
  if (!ok(st)) {
    connect_destroy(pc.release());
    return st;
  }
  *out = pc.release();
  return Status::kSuccess;
}

Status connect_finish(PendingConnect* pc, SendComm** out) {
  Ctx* ctx = pc->ctx;
  size_t len = 0;
  ucs_status_t s = recv_status(ctx, pc->ack_req, &len);
  if (s == UCS_INPROGRESS) {
    if (pc->ep_error->status != UCS_OK)
      return set_error(Status::kRemote, kLog, "ucx connect to %s failed: %s (is the peer "
                       "alive and reachable?)", pc->addr.to_string().c_str(),
                       ucs_text(ctx, pc->ep_error->status));
    if (timed_out(pc->start_ns))
      return set_error(Status::kTimeout, kLog, "ucx connect to %s: no handshake reply within "
                       "ZCX_TIMEOUT (%lld ms)", pc->addr.to_string().c_str(),
                       static_cast<long long>(zcx::params::timeout_ms()));
    return Status::kSuccess;
  }
  if (s != UCS_OK)
    return set_error(Status::kProtocol, kLog, "ucx connect to %s: handshake reply failed: %s",
                     pc->addr.to_string().c_str(), ucs_text(ctx, s));
  Hello ack;
  ZCX_TRY(hello_decode(pc->ack_buf, len, &ack));
  ZCX_TRY(check_ack(pc, ack, ctx->self));
  CommBase* c = make_comm(ctx, pc->ep, std::move(pc->ep_error), ack.who, ack.conn_id, true);
  pc->ep = nullptr;
  c->handshake_req = pc->hello_req;  // finished by now (the ack answered it), freed at close
  c->handshake_buf = std::move(pc->hello_buf);
  pc->hello_req = nullptr;
  ZCX_INFO(kLog, "ucx: connected to %s at %s, connection %u", c->peer.text().c_str(),
           pc->addr.to_string().c_str(), c->conn_id);
  *out = c;
  return Status::kSuccess;
}

void connect_destroy(PendingConnect* pc) {
  Ctx* ctx = pc->ctx;
  cancel_recv(ctx, pc->ack_req);
  ep_close(ctx, pc->ep, std::move(pc->ep_error));
  if (pc->hello_req != nullptr) ctx->api->request_free(pc->hello_req);
  delete pc;
}

// ---- acceptor -----------------------------------------------------------------------------

Status accept_start(ListenComm* lc, ucp_conn_request_h request, const zcx_peer_info_t&) {
  Ctx* ctx = lc->ctx;
  Accepting& a = lc->cur;
  a = Accepting{};
  a.ep_error = std::make_unique<EpError>();
  a.start_ns = now_ns();
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler = error_handler(a.ep_error.get());
  ucs_status_t s = ctx->api->ep_create(ctx->worker, &params, &a.ep);
  if (s != UCS_OK)
    return set_error(Status::kRemote, kLog, "ucx accept on %s: endpoint creation failed: %s",
                     lc->addr.to_string().c_str(), ucs_text(ctx, s));
  lc->accepting = true;
  Status st = post_recv(ctx, a.hello_buf, sizeof(a.hello_buf), hello_tag(lc->listen_id),
                        &a.hello_req);
  if (!ok(st)) abandon_accept(lc);
  return st;
}

void abandon_accept(ListenComm* lc) {
  cancel_recv(lc->ctx, lc->cur.hello_req);
  ep_close(lc->ctx, lc->cur.ep, std::move(lc->cur.ep_error));
  lc->cur = Accepting{};
  lc->accepting = false;
}

namespace {

Status check_hello(const ListenComm* lc, const Hello& hello, const Self& self) {
  PeerName peer{hello.who};
  if (hello.kind != 1)
    return set_error(Status::kProtocol, kLog, "ucx accept on %s: %s sent handshake kind %u",
                     lc->addr.to_string().c_str(), peer.text().c_str(), hello.kind);
  if (hello.secret != self.secret)
    return set_error(Status::kAuth, kLog, "ucx accept on %s: %s presented a different job "
                     "secret (another job, or a stray connection): rejected",
                     lc->addr.to_string().c_str(), peer.text().c_str());
  return Status::kSuccess;
}

// Answers a hello: an accepting ack with our identity, or a rejection with the reason.
Status send_ack(Ctx* ctx, ucp_ep_h ep, const Hello& hello, Status result, uint32_t conn_id,
                const zcx_peer_info_t& self, std::string* buf, void** req) {
  Hello ack;
  ack.kind = 2;
  ack.result = static_cast<uint16_t>(result);
  ack.secret = ok(result) ? ctx->self.secret : 0;  // never echo a secret to a stranger
  ack.nonce = hello.nonce & ((1ull << kKindShift) - 1);
  ack.conn_id = conn_id;
  ack.who = self;
  *buf = hello_encode(ack);
  return post_send(ctx, ep, buf->data(), buf->size(), ack_tag(ack.nonce), req);
}

uint32_t next_conn_id(Ctx* ctx) {
  uint32_t id = ctx->next_conn_id;
  ctx->next_conn_id = id >= kConnMask ? 1 : id + 1;
  return id;
}

}  // namespace

Status accept_finish(ListenComm* lc, const zcx_peer_info_t& self, RecvComm** out) {
  Ctx* ctx = lc->ctx;
  Accepting& a = lc->cur;
  size_t len = 0;
  ucs_status_t s = recv_status(ctx, a.hello_req, &len);
  Status st = Status::kSuccess;
  if (s == UCS_INPROGRESS) {
    if (a.ep_error->status != UCS_OK)
      st = set_error(Status::kRemote, kLog, "ucx accept on %s: the connecting peer failed "
                     "before its handshake: %s", lc->addr.to_string().c_str(),
                     ucs_text(ctx, a.ep_error->status));
    else if (timed_out(a.start_ns))
      st = set_error(Status::kTimeout, kLog, "ucx accept on %s: no handshake from the "
                     "connecting peer within ZCX_TIMEOUT", lc->addr.to_string().c_str());
    if (!ok(st)) abandon_accept(lc);
    return st;
  }
  Hello hello;
  if (s != UCS_OK)
    st = set_error(Status::kProtocol, kLog, "ucx accept on %s: handshake receive failed: %s",
                   lc->addr.to_string().c_str(), ucs_text(ctx, s));
  if (ok(st)) st = hello_decode(a.hello_buf, len, &hello);
  if (ok(st)) st = check_hello(lc, hello, ctx->self);
  ctx->api->request_free(a.hello_req);
  a.hello_req = nullptr;
  void* req = nullptr;
  if (!ok(st)) {
    // Tell a peer that spoke our protocol why it was turned away, then drop it.
    if (s == UCS_OK && len == kHelloBytes &&
        ok(send_ack(ctx, a.ep, hello, st, 0, self, &lc->reject_buf, &req)) && req != nullptr)
      ctx->api->request_free(req);  // the close below flushes it
    abandon_accept(lc);
    return st;
  }
  uint32_t conn_id = next_conn_id(ctx);
  CommBase* c = make_comm(ctx, a.ep, std::move(a.ep_error), hello.who, conn_id, false);
  a.ep = nullptr;
  lc->accepting = false;
  st = send_ack(ctx, c->ep, hello, Status::kSuccess, conn_id, self, &c->handshake_buf,
                &c->handshake_req);
  if (!ok(st)) {
    close_comm(c);
    return st;
  }
  ZCX_INFO(kLog, "ucx: accepted %s on %s, connection %u", c->peer.text().c_str(),
           lc->addr.to_string().c_str(), conn_id);
  *out = c;
  return Status::kSuccess;
}

}  // namespace zcx::ucx
