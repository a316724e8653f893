// A small loopback-TCP provider used only by the plugin tests until (and besides) the real
// tcp provider: it lets the harness drive libnccl-net-zcx through two real processes.
// Linked into a test build of the plugin (libnccl-net-zcxfake.so) and chosen there with
// ZCX_NET_PROVIDER=fake. Deliberately simple: one socket per comm, a 16-byte header
// {size u64, tag i32, magic u32} per message, sends complete once written to the socket.
// It returns a NULL isend request every 7th call so the harness exercises NCCL's retry, and
// throws from isend for one magic tag to exercise the plugin's exception firewall.
#include "base/handle.h"
#include "base/provider.h"
#include "common/socket.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

namespace zcx::fake {
namespace {

constexpr uint8_t kFakeId = 0x7e;
constexpr uint32_t kHelloMagic = 0x464b4548;  // "HEKF"
constexpr uint32_t kMsgMagic = 0x464b534d;
constexpr int kMaxRecvs = 8;
constexpr size_t kHelloBytes = 12, kHeaderBytes = 16;

struct HandlePayload {
  uint16_t port;
  uint64_t secret;
} __attribute__((packed));

struct Ctx {
  uint64_t secret = 0;
  std::mutex mu;
  struct Pending {
    UniqueFd fd;
    SockAddr addr;
    bool connected = false;
    uint8_t hello[kHelloBytes];
    size_t sent = 0;
  };
  std::map<const void*, std::unique_ptr<Pending>> pending;  // keyed by NCCL's handle buffer
};

struct Conn;
struct Req {
  Conn* conn = nullptr;
  bool send = true;
  int n = 1;
  void* data[kMaxRecvs] = {};
  size_t sizes[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  bool filled[kMaxRecvs] = {};
  size_t got[kMaxRecvs] = {};
  int nfilled = 0;
  bool done = false;
  uint8_t hdr[kHeaderBytes] = {};
  size_t sent = 0;
};

struct Conn {
  UniqueFd fd;
  bool send = true;
  uint64_t isend_calls = 0;
  std::deque<Req*> queue;  // not yet done, in posting order
  std::set<Req*> live;     // owned until test() reports done
  uint8_t hdr[kHeaderBytes];
  size_t hdr_got = 0;
  bool in_payload = false;
  int slot = 0;
  size_t payload_size = 0, payload_got = 0;
  ~Conn() {
    for (Req* r : live) delete r;
  }
};

struct Listen {
  UniqueFd fd;
  uint64_t secret = 0;
  struct Accepting {
    UniqueFd fd;
    uint8_t hello[kHelloBytes];
    size_t got = 0;
  };
  std::deque<Accepting> accepting;
};

// Moves bytes; returns false on EAGAIN, an error when the peer is gone.
Status io(int fd, bool out, uint8_t* buf, size_t len, size_t* done) {
  while (*done < len) {
    ssize_t n = out ? ::send(fd, buf + *done, len - *done, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : ::recv(fd, buf + *done, len - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::kInProgress;
    return set_error(Status::kRemote, kLogNet, "fake provider: peer closed the connection (%s)",
                     n == 0 ? "EOF" : strerror(errno));
  }
  return Status::kSuccess;
}

Status progress_send(Conn* c) {
  while (!c->queue.empty()) {
    Req* r = c->queue.front();
    size_t total = kHeaderBytes + r->sizes[0];
    if (r->sent < kHeaderBytes) {
      Status s = io(c->fd.get(), true, r->hdr, kHeaderBytes, &r->sent);
      if (s != Status::kSuccess) return s == Status::kInProgress ? Status::kSuccess : s;
    }
    size_t body = r->sent - kHeaderBytes;
    Status s = io(c->fd.get(), true, static_cast<uint8_t*>(r->data[0]), r->sizes[0], &body);
    r->sent = kHeaderBytes + body;
    if (s == Status::kInProgress) return Status::kSuccess;
    if (s != Status::kSuccess) return s;
    if (r->sent == total) {
      r->done = true;
      c->queue.pop_front();
    }
  }
  return Status::kSuccess;
}

Status start_message(Conn* c, Req* r) {
  uint64_t size;
  int32_t tag;
  uint32_t magic;
  memcpy(&size, c->hdr, 8);
  memcpy(&tag, c->hdr + 8, 4);
  memcpy(&magic, c->hdr + 12, 4);
  if (magic != kMsgMagic) return set_error(Status::kProtocol, kLogNet, "fake provider: bad header");
  c->slot = -1;
  for (int i = 0; i < r->n && c->slot < 0; ++i)
    if (!r->filled[i] && (r->n == 1 || r->tags[i] == tag)) c->slot = i;
  if (c->slot < 0)
    return set_error(Status::kProtocol, kLogNet, "fake provider: no receive buffer for tag %d", tag);
  if (size > r->sizes[c->slot])
    return set_error(Status::kInvalidUsage, kLogNet, "fake provider: message truncated (%llu > %zu)",
                     static_cast<unsigned long long>(size), r->sizes[c->slot]);
  c->payload_size = size;
  c->payload_got = 0;
  c->in_payload = true;
  return Status::kSuccess;
}

Status progress_recv(Conn* c) {
  while (!c->queue.empty()) {
    Req* r = c->queue.front();
    if (!c->in_payload) {
      Status s = io(c->fd.get(), false, c->hdr, kHeaderBytes, &c->hdr_got);
      if (s != Status::kSuccess) return s == Status::kInProgress ? Status::kSuccess : s;
      ZCX_TRY(start_message(c, r));
    }
    Status s = io(c->fd.get(), false, static_cast<uint8_t*>(r->data[c->slot]), c->payload_size,
                  &c->payload_got);
    if (s == Status::kInProgress) return Status::kSuccess;
    if (s != Status::kSuccess) return s;
    r->filled[c->slot] = true;
    r->got[c->slot] = c->payload_size;
    c->in_payload = false;
    c->hdr_got = 0;
    if (++r->nfilled == r->n) {
      r->done = true;
      c->queue.pop_front();
    }
  }
  return Status::kSuccess;
}

zcx_status_t fk_init(const zcx_provider_init_t* self, void** ctx) {
  auto* c = new Ctx();
  c->secret = self->secret;
  *ctx = c;
  return ZCX_SUCCESS;
}

zcx_status_t fk_finalize(void* ctx) {
  delete static_cast<Ctx*>(ctx);
  return ZCX_SUCCESS;
}

zcx_status_t fk_devices(void*, int* n) {
  *n = 1;
  return ZCX_SUCCESS;
}

zcx_status_t fk_props(void*, int, zcx_device_props_t* p) {
  *p = zcx_device_props_t{};
  snprintf(p->name, sizeof p->name, "fake0");
  p->guid = 0xfa4e;
  p->speed_mbps = 10000;
  p->mem_kinds = ZCX_MEM_HOST;
  p->max_requests = 32;
  p->max_recvs = kMaxRecvs;
  p->max_comms = 1024;
  p->max_message = 1ull << 30;
  p->reg_is_global = 1;
  return ZCX_SUCCESS;
}

zcx_status_t fk_listen(void* ctx, int, void* handle, void** out) {
  auto l = std::make_unique<Listen>();
  l->secret = static_cast<Ctx*>(ctx)->secret;
  SockAddr addr, bound;
  if (!ok(sockaddr_parse("127.0.0.1:0", &addr))) return ZCX_ERR_SYSTEM;
  Status s = socket_listen(addr, 128, &l->fd, &bound);
  if (!ok(s)) return to_c(s);
  HandlePayload hp{static_cast<uint16_t>(bound.port()), l->secret};
  s = handle_encode(kFakeId, &hp, sizeof hp, handle);
  if (!ok(s)) return to_c(s);
  *out = l.release();
  return ZCX_SUCCESS;
}

Status connect_step(Ctx::Pending* p, uint64_t secret) {
  if (!p->connected) {
    Status s = socket_connect_done(p->fd.get(), p->addr);
    if (s != Status::kSuccess) return s;
    p->connected = true;
    memcpy(p->hello, &kHelloMagic, 4);
    memcpy(p->hello + 4, &secret, 8);
  }
  return io(p->fd.get(), true, p->hello, kHelloBytes, &p->sent);
}

zcx_status_t fk_connect(void* vctx, int, const void* handle, void** out) {
  auto* ctx = static_cast<Ctx*>(vctx);
  *out = nullptr;
  std::lock_guard<std::mutex> lock(ctx->mu);
  auto& slot = ctx->pending[handle];
  if (!slot) {
    HandlePayload hp{};
    size_t len = 0;
    Status s = handle_decode(handle, kFakeId, &hp, sizeof hp, &len);
    if (ok(s) && len != sizeof hp) s = set_error(Status::kInvalidArg, kLogNet, "fake: bad handle length");
    auto p = std::make_unique<Ctx::Pending>();
    if (ok(s)) s = sockaddr_parse("127.0.0.1:" + std::to_string(hp.port), &p->addr);
    if (ok(s)) s = socket_connect_start(p->addr, &p->fd);
    if (!ok(s)) {
      ctx->pending.erase(handle);
      return to_c(s);
    }
    slot = std::move(p);
  }
  Status s = connect_step(slot.get(), ctx->secret);
  if (s == Status::kInProgress) return ZCX_SUCCESS;
  if (s == Status::kSuccess) {
    auto c = std::make_unique<Conn>();
    c->fd = std::move(slot->fd);
    c->send = true;
    *out = c.release();
  }
  ctx->pending.erase(handle);
  return to_c(s);
}

zcx_status_t fk_accept(void* vl, void** out) {
  auto* l = static_cast<Listen*>(vl);
  *out = nullptr;
  UniqueFd fd;
  SockAddr peer;
  Status s = socket_accept(l->fd.get(), &fd, &peer);
  if (s == Status::kSuccess) l->accepting.push_back(Listen::Accepting{std::move(fd), {}, 0});
  else if (s != Status::kInProgress) return to_c(s);
  for (auto it = l->accepting.begin(); it != l->accepting.end(); ++it) {
    s = io(it->fd.get(), false, it->hello, kHelloBytes, &it->got);
    if (s == Status::kInProgress) continue;
    if (!ok(s)) return to_c(s);
    uint32_t magic;
    uint64_t secret;
    memcpy(&magic, it->hello, 4);
    memcpy(&secret, it->hello + 4, 8);
    if (magic != kHelloMagic || secret != l->secret)
      return to_c(set_error(Status::kAuth, kLogNet, "fake provider: wrong hello or job secret"));
    auto c = std::make_unique<Conn>();
    c->fd = std::move(it->fd);
    c->send = false;
    l->accepting.erase(it);
    *out = c.release();
    return ZCX_SUCCESS;
  }
  return ZCX_SUCCESS;
}

struct FakeMr {
  void* data;
  size_t size;
};

zcx_status_t fk_reg(void*, void* data, size_t size, int, void** mh) {
  *mh = new FakeMr{data, size};
  return ZCX_SUCCESS;
}

zcx_status_t fk_dereg(void*, void* mh) {
  delete static_cast<FakeMr*>(mh);
  return ZCX_SUCCESS;
}

// Tag kThrowTag makes isend throw, so the tests can see the plugin's exception firewall.
constexpr int kThrowTag = -424242;

zcx_status_t fk_isend(void* vc, void* data, size_t size, int tag, void*, void** req) {
  auto* c = static_cast<Conn*>(vc);
  *req = nullptr;
  if (tag == kThrowTag) throw std::runtime_error("fake provider: thrown on purpose");
  if (++c->isend_calls % 7 == 0 || c->queue.size() >= 1024) return ZCX_SUCCESS;  // "retry later"
  auto* r = new Req;
  r->conn = c;
  r->send = true;
  r->data[0] = data;
  r->sizes[0] = size;
  uint64_t sz = size;
  int32_t t = tag;
  memcpy(r->hdr, &sz, 8);
  memcpy(r->hdr + 8, &t, 4);
  memcpy(r->hdr + 12, &kMsgMagic, 4);
  c->live.insert(r);
  c->queue.push_back(r);
  *req = r;
  return ZCX_SUCCESS;
}

zcx_status_t fk_irecv(void* vc, int n, void** data, size_t* sizes, int* tags, void**, void** req) {
  auto* c = static_cast<Conn*>(vc);
  if (n < 1 || n > kMaxRecvs) return ZCX_ERR_INVALID_ARG;
  auto* r = new Req;
  r->conn = c;
  r->send = false;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = data[i];
    r->sizes[i] = sizes[i];
    r->tags[i] = tags != nullptr ? tags[i] : 0;
  }
  c->live.insert(r);
  c->queue.push_back(r);
  *req = r;
  return ZCX_SUCCESS;
}

zcx_status_t fk_test(void* vr, int* done, size_t* sizes) {
  auto* r = static_cast<Req*>(vr);
  Conn* c = r->conn;
  Status s = c->send ? progress_send(c) : progress_recv(c);
  if (!ok(s)) return to_c(s);
  *done = r->done ? 1 : 0;
  if (!r->done) return ZCX_SUCCESS;
  for (int i = 0; i < r->n; ++i) sizes[i] = r->send ? r->sizes[0] : r->got[i];
  c->live.erase(r);
  delete r;
  return ZCX_SUCCESS;
}

zcx_status_t fk_close_comm(void* c) {
  delete static_cast<Conn*>(c);  // requests in flight are dropped with it
  return ZCX_SUCCESS;
}

zcx_status_t fk_close_listen(void* l) {
  delete static_cast<Listen*>(l);
  return ZCX_SUCCESS;
}

zcx_provider_ops_t make_ops() {
  zcx_provider_ops_t ops{};
  ops.size = sizeof ops;
  ops.abi_version = ZCX_PROVIDER_ABI_VERSION;
  ops.name = "fake";
  ops.id = kFakeId;
  ops.init = fk_init;
  ops.finalize = fk_finalize;
  ops.devices = fk_devices;
  ops.get_properties = fk_props;
  ops.listen = fk_listen;
  ops.connect = fk_connect;
  ops.accept = fk_accept;
  ops.reg_mr = fk_reg;
  ops.dereg_mr = fk_dereg;
  ops.isend = fk_isend;
  ops.irecv = fk_irecv;
  ops.test = fk_test;
  ops.close_send = fk_close_comm;
  ops.close_recv = fk_close_comm;
  ops.close_listen = fk_close_listen;
  return ops;
}

const zcx_provider_ops_t kOps = make_ops();

}  // namespace
}  // namespace zcx::fake

extern "C" const zcx_provider_ops_t* zcx_plugin_test_provider(void) { return &zcx::fake::kOps; }
