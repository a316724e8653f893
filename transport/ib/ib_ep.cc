// Connection set-up: listen writes IP:port + nonce into the handle; connect and accept are
// non-blocking state machines that exchange one Hello each way over TCP, bring the QPs to
// RTS, and finish with a 4-byte "ready" from the connector (so the acceptor never writes a
// CTS before the connector's QPs can take it).
#include "ib/ib.h"

#include "base/handle.h"
#include "common/random.h"
#include "common/config_vars.h"
#include "common/log.h"
#include "common/wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace zcx::ib {

struct PendingConnect {
  const void* handle_ptr = nullptr;
  uint8_t handle_copy[ZCX_HANDLE_BYTES] = {};
  SockAddr addr;
  uint64_t nonce = 0;
  int stage = 0;  // 0 connecting, 1 hello out, 2 reply in, 3 ready out
  std::unique_ptr<SendComm> comm;
  NbIo io;
  Deadline deadline = Deadline::after_ms(::zcx::params::timeout_ms());
};

struct PendingAccept {
  int stage = 0;  // 0 hello in, 1 reply out, 2 ready in
  std::unique_ptr<RecvComm> comm;
  NbIo io;
  SockAddr from;
  Deadline deadline = Deadline::after_ms(::zcx::params::timeout_ms());
};

namespace {

constexpr uint32_t kReady = 0x21594452;  // "RDY!"
constexpr uint16_t kKindConnect = 1, kKindAccept = 2;

std::string describe(const Hello& h, const SockAddr& a) {
  return "rank " + std::to_string(h.rank) + " (" + h.host + ", pid " + std::to_string(h.pid) +
         ", " + a.to_string() + ")";
}

void fill_local(Comm* c, const zcx_provider_init_t& self) {
  c->poll_yield = params::poll_yield.get();
  c->split = params::split.get();
  c->inline_bytes = params::inline_bytes.get();
  c->timeout_ms = ::zcx::params::timeout_ms();
  c->local.secret = self.secret;
  c->local.rank = self.rank;
  c->local.pid = static_cast<int32_t>(getpid());
  c->local.host = self.host;
  c->local.nqps = static_cast<uint8_t>(c->nqps);
  c->local.mtu = static_cast<uint8_t>(c->dev->port_attr.active_mtu);
  c->local.link_layer = c->dev->port_attr.link_layer;
  c->local.lid = c->dev->port_attr.lid;
  c->local.gid = c->dev->gid;
  c->local.psn = static_cast<uint32_t>(random_u64() & 0xffffff);
}

// Checks what only the peer can get wrong: job secret, nonce, link layer.
Status check_peer(Comm* c, uint64_t nonce) {
  const Hello& r = c->remote;
  if (r.secret != c->local.secret)
    return set_error(Status::kAuth, kLog,
                     "ib: %s presented a different job secret: it belongs to another job or "
                     "was started with another ZCX_SECRET", c->peer_desc.c_str());
  if (r.nonce != nonce)
    return set_error(Status::kProtocol, kLog,
                     "ib: %s answered with the nonce of another listen handle", c->peer_desc.c_str());
  if (r.link_layer != c->local.link_layer)
    return set_error(Status::kMismatch, kLog,
                     "ib: %s uses link layer %u but %s uses %u: InfiniBand and RoCE ports "
                     "cannot talk; select matching ports with ZCX_IB_HCA",
                     c->peer_desc.c_str(), r.link_layer, c->dev->name.c_str(), c->local.link_layer);
  c->peer.rank = r.rank;
  c->peer.pid = r.pid;
  snprintf(c->peer.host, sizeof c->peer.host, "%s", r.host.c_str());
  return Status::kSuccess;
}

// Registers an array that the peer writes into (or that we write from).
template <typename T>
Status alloc_registered(Comm* c, size_t count, std::unique_ptr<T[]>* arr, MrEntry** mr) {
  arr->reset(new T[count]());
  return mr_register(c->dev, arr->get(), count * sizeof(T), ZCX_MEM_HOST, mr);
}

Status sender_setup(Ctx* ctx, SendComm* c) {
  c->is_send = true;
  ZCX_TRY(qp_create(c, static_cast<int>(params::qps.get())));
  ZCX_TRY(alloc_registered(c, kSlots, &c->fifo, &c->fifo_mr));
  ZCX_TRY(alloc_registered(c, kSendReqs, &c->size_src, &c->size_src_mr));
  c->reqs.reset(new Request[kSendReqs]);
  fill_local(c, ctx->self);
  c->local.buf_addr = reinterpret_cast<uintptr_t>(c->fifo.get());
  c->local.buf_rkey = c->fifo_mr->mr->rkey;
  return Status::kSuccess;
}

Status receiver_setup(Ctx* ctx, RecvComm* c, int nqps) {
  ZCX_TRY(qp_create(c, nqps));
  ZCX_TRY(alloc_registered(c, kSlots, &c->cts_src, &c->cts_src_mr));
  ZCX_TRY(alloc_registered(c, kSendReqs, &c->sizes, &c->sizes_mr));
  c->reqs.reset(new Request[kSlots]);
  c->test_corrupt = params::test_corrupt_cts.get();
  if (!c->test_corrupt.empty())
    ZCX_WARN(kLog, "ib: test hook ZCX_IB_TEST_CORRUPT_CTS=%s corrupts every clear-to-send",
             c->test_corrupt.c_str());
  fill_local(c, ctx->self);
  c->local.buf_addr = reinterpret_cast<uintptr_t>(c->sizes.get());
  c->local.buf_rkey = c->sizes_mr->mr->rkey;
  ZCX_TRY(qp_connect(c));
  for (int q = 0; q < nqps; ++q) ZCX_TRY(post_recv_wrs(c, q, kSendReqs + 32));
  return Status::kSuccess;
}

Status handle_parse(const void* handle, SockAddr* addr, uint64_t* nonce) {
  uint8_t payload[kHandlePayloadMax];
  size_t len = 0;
  ZCX_TRY(handle_decode(handle, ZCX_PROVIDER_ID_IB, payload, sizeof payload, &len));
  wire::Reader r(payload, len);
  uint8_t fam = r.u8();
  uint16_t port = r.u16();
  uint8_t ip[16];
  r.bytes(ip, 16);
  *nonce = r.u64();
  if (!r.ok() || (fam != 4 && fam != 6) || port == 0)
    return set_error(Status::kInvalidArg, kLog, "ib: malformed connection handle");
  *addr = SockAddr();
  if (fam == 4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&addr->storage);
    sin->sin_family = AF_INET;
    memcpy(&sin->sin_addr, ip, 4);
    addr->len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&addr->storage);
    sin6->sin6_family = AF_INET6;
    memcpy(&sin6->sin6_addr, ip, 16);
    addr->len = sizeof(sockaddr_in6);
  }
  addr->set_port(port);
  return Status::kSuccess;
}

Status handle_write(const ListenComm& l, void* handle) {
  uint8_t payload[kHandlePayloadMax] = {};
  wire::Writer w(payload, sizeof payload);
  uint8_t ip[16] = {};
  if (l.addr.family() == AF_INET)
    memcpy(ip, &reinterpret_cast<const sockaddr_in*>(&l.addr.storage)->sin_addr, 4);
  else
    memcpy(ip, &reinterpret_cast<const sockaddr_in6*>(&l.addr.storage)->sin6_addr, 16);
  w.u8(l.addr.family() == AF_INET ? 4 : 6);
  w.u16(static_cast<uint16_t>(l.addr.port()));
  w.bytes(ip, 16);
  w.u64(l.nonce);
  return handle_encode(ZCX_PROVIDER_ID_IB, payload, w.size(), handle);
}

// One step of the connector; kSuccess when the comm is ready.
Status connect_step(Ctx* ctx, PendingConnect* p) {
  SendComm* c = p->comm.get();
  if (p->stage == 0) {
    Status s = socket_connect_done(c->sock.get(), p->addr);
    if (s != Status::kSuccess) return s;
    ZCX_TRY(sender_setup(ctx, c));
    c->local.nonce = p->nonce;  // proves we were given this listener's handle
    p->io = NbIo{};
    hello_encode(c->local, kKindConnect, p->io.buf);
    p->io.len = kHelloBytes;
    p->stage = 1;
  }
  if (p->stage == 1) {
    ZCX_TRY(p->io.send(c->sock.get(), c->peer_desc.c_str()));
    p->io = NbIo{};
    p->io.len = kHelloBytes;
    p->stage = 2;
  }
  if (p->stage == 2) {
    ZCX_TRY(p->io.recv(c->sock.get(), c->peer_desc.c_str()));
    ZCX_TRY(hello_decode(p->io.buf, kKindAccept, &c->remote, c->peer_desc));
    c->peer_desc = describe(c->remote, p->addr);
    ZCX_TRY(check_peer(c, p->nonce));
    if (c->remote.nqps != c->nqps)
      return set_error(Status::kProtocol, kLog, "ib: %s created %u QPs, we asked for %d",
                       c->peer_desc.c_str(), c->remote.nqps, c->nqps);
    ZCX_TRY(qp_connect(c));
    p->io = NbIo{};
    memcpy(p->io.buf, &kReady, 4);
    p->io.len = 4;
    p->stage = 3;
  }
  return p->io.send(c->sock.get(), c->peer_desc.c_str());
}

// One step of the acceptor; kSuccess when the comm is ready.
Status accept_step(ListenComm* l, PendingAccept* p) {
  RecvComm* c = p->comm.get();
  if (p->stage == 0) {
    ZCX_TRY(p->io.recv(c->sock.get(), c->peer_desc.c_str()));
    ZCX_TRY(hello_decode(p->io.buf, kKindConnect, &c->remote, c->peer_desc));
    c->peer_desc = describe(c->remote, p->from);
    c->local.secret = l->ctx->self.secret;  // authenticate before creating anything
    c->local.link_layer = c->dev->port_attr.link_layer;
    ZCX_TRY(check_peer(c, l->nonce));
    ZCX_TRY(receiver_setup(l->ctx, c, c->remote.nqps));
    c->local.nonce = l->nonce;
    p->io = NbIo{};
    hello_encode(c->local, kKindAccept, p->io.buf);
    p->io.len = kHelloBytes;
    p->stage = 1;
  }
  if (p->stage == 1) {
    ZCX_TRY(p->io.send(c->sock.get(), c->peer_desc.c_str()));
    p->io = NbIo{};
    p->io.len = 4;
    p->stage = 2;
  }
  ZCX_TRY(p->io.recv(c->sock.get(), c->peer_desc.c_str()));
  uint32_t ready = 0;
  memcpy(&ready, p->io.buf, 4);
  if (ready != kReady)
    return set_error(Status::kProtocol, kLog, "ib: %s sent a bad ready marker",
                     c->peer_desc.c_str());
  return Status::kSuccess;
}

Status timed_out(const Deadline& dl, const std::string& who, const char* what) {
  if (!dl.expired()) return Status::kInProgress;
  return set_error(Status::kTimeout, kLog,
                   "ib: %s with %s did not finish within ZCX_TIMEOUT (%.0f s)", what,
                   who.c_str(), ::zcx::params::timeout.get());
}

}  // namespace

Status NbIo::send(int fd, const char* peer) {
  while (done < len) {
    ssize_t n = ::send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return Status::kInProgress;
    } else {
      return set_error(Status::kRemote, kLog, "ib: sending the handshake to %s failed: %s",
                       peer, n == 0 ? "closed" : errno_text(errno));
    }
  }
  return Status::kSuccess;
}

Status NbIo::recv(int fd, const char* peer) {
  while (done < len) {
    ssize_t n = ::recv(fd, buf + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return Status::kInProgress;
    } else {
      return set_error(Status::kRemote, kLog,
                       "ib: %s closed the connection during the handshake%s%s (wrong job, "
                       "or the peer failed: see its log)",
                       peer, n == 0 ? "" : ": ", n == 0 ? "" : errno_text(errno));
    }
  }
  return Status::kSuccess;
}

SendComm::~SendComm() {
  const IbvApi* api = ibv_shim();
  for (ibv_qp* qp : qps) api->destroy_qp(qp);  // no remote write after this
  qps.clear();
  mr_release(fifo_mr);
  mr_release(size_src_mr);
}

RecvComm::~RecvComm() {
  const IbvApi* api = ibv_shim();
  for (ibv_qp* qp : qps) api->destroy_qp(qp);
  qps.clear();
  if (flush_qp) api->destroy_qp(flush_qp);
  mr_release(flush_sink_mr);
  mr_release(cts_src_mr);
  mr_release(sizes_mr);
}

ListenComm::~ListenComm() { delete pending; }

zcx_status_t listen(void* vctx, int dev, void* handle, void** listen_comm) {
  auto* ctx = static_cast<Ctx*>(vctx);
  if (ctx == nullptr || handle == nullptr || listen_comm == nullptr || dev < 0 ||
      dev >= static_cast<int>(ctx->devs.size()))
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: listen on device %d: no such device", dev));
  auto l = std::make_unique<ListenComm>();
  l->ctx = ctx;
  l->dev = ctx->devs[dev];
  l->nonce = random_u64();
  SockAddr local;
  ZCX_IB_TRY_C(socket_local_address(&local, nullptr));
  ZCX_IB_TRY_C(socket_listen(local, 64, &l->fd, &l->addr));
  ZCX_IB_TRY_C(handle_write(*l, handle));
  ZCX_INFO(kLog, "ib: listening on %s for %s", l->addr.to_string().c_str(), l->dev->name.c_str());
  *listen_comm = l.release();
  return ZCX_SUCCESS;
}

static PendingConnect* find_pending(Ctx* ctx, const void* handle) {
  for (PendingConnect* p : ctx->pending)
    if (p->handle_ptr == handle && memcmp(p->handle_copy, handle, ZCX_HANDLE_BYTES) == 0)
      return p;
  return nullptr;
}

zcx_status_t connect(void* vctx, int dev, const void* handle, void** send_comm) {
  auto* ctx = static_cast<Ctx*>(vctx);
  if (ctx == nullptr || handle == nullptr || send_comm == nullptr || dev < 0 ||
      dev >= static_cast<int>(ctx->devs.size()))
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: connect on device %d: no such device", dev));
  *send_comm = nullptr;
  std::lock_guard<std::mutex> lock(ctx->mu);
  PendingConnect* p = find_pending(ctx, handle);
  if (p == nullptr) {
    auto np = std::make_unique<PendingConnect>();
    np->handle_ptr = handle;
    memcpy(np->handle_copy, handle, ZCX_HANDLE_BYTES);
    ZCX_IB_TRY_C(handle_parse(handle, &np->addr, &np->nonce));
    np->comm = std::make_unique<SendComm>();
    np->comm->ctx = ctx;
    np->comm->dev = ctx->devs[dev];
    np->comm->peer_desc = "the listener at " + np->addr.to_string();
    Status s = socket_connect_start(np->addr, &np->comm->sock);
    if (!ok(s)) return to_c(set_error(s, kLog, "ib: %s", last_error()));
    p = np.release();
    ctx->pending.push_back(p);
  }
  Status s = connect_step(ctx, p);
  if (s == Status::kInProgress) s = timed_out(p->deadline, p->comm->peer_desc, "ib connect");
  if (s == Status::kInProgress) return ZCX_SUCCESS;
  std::erase(ctx->pending, p);
  std::unique_ptr<PendingConnect> done(p);
  if (!ok(s)) return to_c(s);
  done->comm->last_progress_ns = now_ns();
  ZCX_INFO(kLog, "ib: connected to %s over %s with %d QP(s)", done->comm->peer_desc.c_str(),
           done->comm->dev->name.c_str(), done->comm->nqps);
  *send_comm = done->comm.release();
  return ZCX_SUCCESS;
}

zcx_status_t accept(void* vlisten, void** recv_comm) {
  auto* l = static_cast<ListenComm*>(vlisten);
  if (l == nullptr || recv_comm == nullptr)
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: accept: NULL argument"));
  *recv_comm = nullptr;
  if (l->pending == nullptr) {
    UniqueFd fd;
    SockAddr from;
    Status s = socket_accept(l->fd.get(), &fd, &from);
    if (s == Status::kInProgress) return ZCX_SUCCESS;
    ZCX_IB_TRY_C(s);
    l->pending = new PendingAccept();
    l->pending->from = from;
    l->pending->io.len = kHelloBytes;
    l->pending->comm = std::make_unique<RecvComm>();
    RecvComm* c = l->pending->comm.get();
    c->ctx = l->ctx;
    c->dev = l->dev;
    c->sock = std::move(fd);
    c->peer_desc = "the connector at " + from.to_string();
  }
  PendingAccept* p = l->pending;
  Status s = accept_step(l, p);
  if (s == Status::kInProgress) s = timed_out(p->deadline, p->comm->peer_desc, "ib accept");
  if (s == Status::kInProgress) return ZCX_SUCCESS;
  l->pending = nullptr;
  std::unique_ptr<PendingAccept> done(p);
  if (!ok(s)) return to_c(s);
  done->comm->last_progress_ns = now_ns();
  ZCX_INFO(kLog, "ib: accepted %s over %s with %d QP(s)", done->comm->peer_desc.c_str(),
           done->comm->dev->name.c_str(), done->comm->nqps);
  *recv_comm = done->comm.release();
  return ZCX_SUCCESS;
}

void pending_connects_clear(Ctx* ctx) {
  std::lock_guard<std::mutex> lock(ctx->mu);
  for (PendingConnect* p : ctx->pending) delete p;
  ctx->pending.clear();
}

}  // namespace zcx::ib
