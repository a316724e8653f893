// The tcp provider's ops table: argument checks at the C boundary, request posting, test().
#include "common/check.h"
#include "common/clock.h"
#include "common/config_vars.h"
#include "tcp/tcp.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace zcx::tcp {


namespace {

Context* as_ctx(void* p) { return static_cast<Context*>(p); }

Comm* as_comm(void* p, uint32_t want) {
  Comm* c = static_cast<Comm*>(p);
  return c != nullptr && c->tag == want ? c : nullptr;
}

Comm* as_any_comm(void* p) {
  Comm* c = static_cast<Comm*>(p);
  return c != nullptr && (c->tag == kSendTag || c->tag == kRecvTag) ? c : nullptr;
}

Status check_dev(void* ctx, int dev, const char* op) {
  int ndev = as_ctx(ctx)->ndev;
  if (dev >= 0 && dev < ndev) return Status::kSuccess;
  if (ndev == 0)
    return set_error(Status::kNoDevice, kLogTcp, "tcp %s: no usable network interface "
                     "(check ZCX_SOCKET_IFNAME)", op);
  return set_error(Status::kInvalidArg, kLogTcp, "tcp %s: no device %d (tcp has %d)", op, dev,
                   ndev);
}

Status init(const zcx_provider_init_t* self, void** out) {
  ZCX_CHECK_ARG(self != nullptr && out != nullptr && self->size >= sizeof(zcx_provider_init_t),
                kLogTcp, "tcp init: NULL or short zcx_provider_init_t");
  auto ctx = std::make_unique<Context>();
  ctx->self = *self;
  ctx->self.host[sizeof ctx->self.host - 1] = '\0';
  ctx->pid = static_cast<int>(getpid());
  // No usable interface is "0 devices", not a failed init (the warning names the cause).
  (void)device_discover(ctx.get());
  *out = ctx.release();
  return Status::kSuccess;
}

Status finalize(void* ctx) {
  ZCX_CHECK_ARG(ctx != nullptr, kLogTcp, "tcp finalize: NULL context");
  delete as_ctx(ctx);
  return Status::kSuccess;
}

Status devices(void* ctx, int* ndev) {
  ZCX_CHECK_ARG(ctx != nullptr && ndev != nullptr, kLogTcp, "tcp devices: NULL argument");
  *ndev = as_ctx(ctx)->ndev;
  return Status::kSuccess;
}

Status get_properties(void* ctx, int dev, zcx_device_props_t* props) {
  ZCX_CHECK_ARG(ctx != nullptr && props != nullptr, kLogTcp, "tcp properties: NULL argument");
  ZCX_TRY(check_dev(ctx, dev, "properties"));
  *props = as_ctx(ctx)->props;
  return Status::kSuccess;
}

Status listen(void* ctx, int dev, void* handle, void** listen_comm) {
  ZCX_CHECK_ARG(ctx != nullptr && handle != nullptr && listen_comm != nullptr, kLogTcp,
                "tcp listen: NULL argument");
  ZCX_TRY(check_dev(ctx, dev, "listen"));
  Listener* l = nullptr;
  ZCX_TRY(ep_listen(as_ctx(ctx), handle, &l));
  *listen_comm = l;
  return Status::kSuccess;
}

Status connect(void* ctx, int dev, const void* handle, void** send_comm) {
  ZCX_CHECK_ARG(ctx != nullptr && handle != nullptr && send_comm != nullptr, kLogTcp,
                "tcp connect: NULL argument");
  *send_comm = nullptr;
  ZCX_TRY(check_dev(ctx, dev, "connect"));
  Comm* c = nullptr;
  ZCX_TRY(ep_connect(as_ctx(ctx), handle, &c));
  *send_comm = c;
  return Status::kSuccess;
}

Status accept(void* listen_comm, void** recv_comm) {
  ZCX_CHECK_ARG(recv_comm != nullptr, kLogTcp, "tcp accept: NULL argument");
  *recv_comm = nullptr;
  ZCX_CHECK_ARG(ep_is_listener(listen_comm), kLogTcp, "tcp accept: not a tcp listen comm");
  Comm* c = nullptr;
  ZCX_TRY(ep_accept(static_cast<Listener*>(listen_comm), &c));
  *recv_comm = c;
  return Status::kSuccess;
}

// connect_reverse (a recv comm in, a send comm out) and accept_reverse (the other way).
template <uint32_t kInTag, Status (*Reverse)(Comm*, Comm**)>
Status reverse(void* in, void** out, const char* op) {
  ZCX_CHECK_ARG(out != nullptr, kLogTcp, "tcp %s: NULL argument", op);
  *out = nullptr;
  Comm* c = as_comm(in, kInTag);
  ZCX_CHECK_ARG(c != nullptr, kLogTcp, "tcp %s: not a tcp %s comm", op,
                kInTag == kRecvTag ? "recv" : "send");
  Comm* made = nullptr;
  ZCX_TRY(Reverse(c, &made));
  *out = made;
  return Status::kSuccess;
}

Status peer_info(void* comm, zcx_peer_info_t* info) {
  Comm* c = as_any_comm(comm);
  ZCX_CHECK_ARG(c != nullptr && info != nullptr, kLogTcp, "tcp peer_info: bad argument");
  *info = c->peer;
  return Status::kSuccess;
}

Status reg_mr(void* comm, void* data, size_t size, int kind, void** mhandle) {
  ZCX_CHECK_ARG(as_any_comm(comm) != nullptr, kLogTcp, "tcp reg_mr: not a tcp comm");
  return md_register(comm, data, size, kind, mhandle);
}

Status dereg_mr(void* comm, void* mhandle) {
  ZCX_CHECK_ARG(as_any_comm(comm) != nullptr, kLogTcp, "tcp dereg_mr: not a tcp comm");
  return md_deregister(comm, mhandle);
}

Status isend(void* send_comm, void* data, size_t size, int tag, void* /*mhandle*/,
             void** request) {
  ZCX_CHECK_ARG(request != nullptr, kLogTcp, "tcp isend: NULL request pointer");
  *request = nullptr;
  Comm* c = as_comm(send_comm, kSendTag);
  ZCX_CHECK_ARG(c != nullptr, kLogTcp, "tcp isend: not a tcp send comm");
  ZCX_CHECK_ARG(data != nullptr || size == 0, kLogTcp, "tcp isend: NULL buffer of %zu bytes",
                size);
  ZCX_CHECK_ARG(size <= kMaxMessage, kLogTcp, "tcp isend: %zu bytes exceeds the maximum %zu",
                size, kMaxMessage);
  if (c->error.has()) return c->error.raise();
  if (c->tail - c->head >= c->ring.size()) return Status::kSuccess;
  Request* r = request_get(c);
  if (r == nullptr) return Status::kSuccess;  // pool full: retry later
  r->n = 1;
  r->left = 1;
  r->cap[0] = size;
  r->got[0] = size;
  c->ring[c->tail % c->ring.size()] =
      Message{static_cast<char*>(data), size, tag, r, c->layout.nsocks};
  ++c->tail;
  *request = r;
  // Start at once when the line is free: a small message leaves in this very call. A failure
  // is recorded on the comm and reported by test().
  if (c->tail - c->head == 1) (void)progress_send(c);
  return Status::kSuccess;
}

Status check_recv_args(int n, void** data, size_t* sizes, int* tags) {
  ZCX_CHECK_ARG(n >= 1 && n <= kMaxRecvs, kLogTcp, "tcp irecv: n=%d outside 1..%d", n,
                kMaxRecvs);
  ZCX_CHECK_ARG(data != nullptr && sizes != nullptr && tags != nullptr, kLogTcp,
                "tcp irecv: NULL array");
  for (int i = 0; i < n; ++i) {
    ZCX_CHECK_ARG(data[i] != nullptr || sizes[i] == 0, kLogTcp,
                  "tcp irecv: NULL buffer %d of %zu bytes", i, sizes[i]);
    ZCX_CHECK_ARG(sizes[i] <= kMaxMessage, kLogTcp, "tcp irecv: buffer %d of %zu bytes "
                  "exceeds the maximum %zu", i, sizes[i], kMaxMessage);
  }
  return Status::kSuccess;
}

Status irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** /*mh*/,
             void** request) {
  ZCX_CHECK_ARG(request != nullptr, kLogTcp, "tcp irecv: NULL request pointer");
  *request = nullptr;
  Comm* c = as_comm(recv_comm, kRecvTag);
  ZCX_CHECK_ARG(c != nullptr, kLogTcp, "tcp irecv: not a tcp recv comm");
  ZCX_TRY(check_recv_args(n, data, sizes, tags));
  if (c->error.has()) return c->error.raise();
  Request* r = request_get(c);
  if (r == nullptr) return Status::kSuccess;
  r->n = n;
  r->left = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = static_cast<char*>(data[i]);
    r->cap[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  c->pending[(c->pend_head + c->pend_count) % c->pending.size()] = r;
  ++c->pend_count;
  *request = r;
  return Status::kSuccess;
}

Status check_timeout(Comm* c, Request* r) {
  // Reading the clock on every idle poll costs more than the poll itself; every 64th will do.
  if (++c->idle_polls % 64 != 0) return Status::kSuccess;
  const int64_t now = now_ns();
  if (c->moves != c->moves_seen) {
    c->moves_seen = c->moves;
    c->last_progress_ns = now;
  }
  if (r->posted_ns == 0) r->posted_ns = now;  // at most 63 polls after it was posted
  int64_t since = std::max(c->last_progress_ns, r->posted_ns);
  int64_t limit = c->timeout_ns;
  if (now - since <= limit) return Status::kSuccess;
  return comm_fail(c, Status::kTimeout, "tcp %s with %s made no progress for %.1f s "
                   "(ZCX_TIMEOUT); is the peer stuck or not posting the matching %s?",
                   c->is_send ? "send" : "receive", c->peer_text.c_str(), limit / 1e9,
                   c->is_send ? "receive" : "send");
}

Status test(void* request, int* done, size_t* sizes) {
  ZCX_CHECK_ARG(done != nullptr, kLogTcp, "tcp test: NULL done pointer");
  *done = 0;
  Request* r = static_cast<Request*>(request);
  ZCX_CHECK_ARG(r != nullptr && r->tag == kRequestTag, kLogTcp,
                "tcp test: not a live tcp request (NULL, already completed, or foreign)");
  Comm* c = r->comm;
  if (r->left > 0) {  // a request that finished before a later failure still reports done
    if (c->error.has()) return c->error.raise();
    Status st = c->is_send ? progress_send(c) : progress_recv(c);
    if (r->left > 0) {  // (a failure after r completed in this call waits for the next test)
      ZCX_TRY(st);
      return check_timeout(c, r);
    }
  }
  *done = 1;
  if (sizes != nullptr)
    for (int i = 0; i < r->n; ++i) sizes[i] = r->got[i];
  request_put(r);
  return Status::kSuccess;
}

Status close_comm(void* comm, uint32_t want, const char* what) {
  Comm* c = as_comm(comm, want);
  ZCX_CHECK_ARG(c != nullptr, kLogTcp, "tcp %s: not a tcp %s comm", what,
                want == kSendTag ? "send" : "recv");
  c->tag = kDeadTag;
  for (Request& r : c->pool) r.tag = kDeadTag;
  delete c;
  return Status::kSuccess;
}

Status close_listen(void* listen_comm) {
  ZCX_CHECK_ARG(ep_is_listener(listen_comm), kLogTcp, "tcp close_listen: not a listen comm");
  ep_close_listen(static_cast<Listener*>(listen_comm));
  return Status::kSuccess;
}

// C adapters: the table holds plain functions returning zcx_status_t.
template <auto F, typename... A>
zcx_status_t c_call(A... a) {
  return to_c(F(a...));
}

const zcx_provider_ops_t kOps = {
    sizeof(zcx_provider_ops_t),
    ZCX_PROVIDER_ABI_VERSION,
    "tcp",
    ZCX_PROVIDER_ID_TCP,
    0,
    c_call<init, const zcx_provider_init_t*, void**>,
    c_call<finalize, void*>,
    c_call<devices, void*, int*>,
    c_call<get_properties, void*, int, zcx_device_props_t*>,
    c_call<listen, void*, int, void*, void**>,
    c_call<connect, void*, int, const void*, void**>,
    c_call<accept, void*, void**>,
    c_call<peer_info, void*, zcx_peer_info_t*>,
    c_call<reg_mr, void*, void*, size_t, int, void**>,
    nullptr,
    c_call<dereg_mr, void*, void*>,
    c_call<isend, void*, void*, size_t, int, void*, void**>,
    c_call<irecv, void*, int, void**, size_t*, int*, void**, void**>,
    nullptr,
    c_call<test, void*, int*, size_t*>,
    [](void* c) { return to_c(close_comm(c, kSendTag, "close_send")); },
    [](void* c) { return to_c(close_comm(c, kRecvTag, "close_recv")); },
    c_call<close_listen, void*>,
    [](void* r, void** s) {
      return to_c(reverse<kRecvTag, ep_connect_reverse>(r, s, "connect_reverse"));
    },
    [](void* s, void** r) {
      return to_c(reverse<kSendTag, ep_accept_reverse>(s, r, "accept_reverse"));
    },
};

}  // namespace
}  // namespace zcx::tcp

extern "C" __attribute__((visibility("default"))) const zcx_provider_ops_t* zcx_provider_tcp(
    void) {
  return &zcx::tcp::kOps;
}
