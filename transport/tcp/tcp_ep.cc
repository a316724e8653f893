// Connection set-up: the handle, the per-socket hello, and the non-blocking state machines of
// listen/connect/accept. Nothing here waits: each call advances what it can and returns.
#include "base/handle.h"
#include "common/random.h"
#include "common/clock.h"
#include "common/config_vars.h"
#include "common/wire.h"
#include "tcp/tcp.h"

#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

namespace zcx::tcp {

// The listener's half of a handle: where to connect and who listens there.
struct HandleInfo {
  SockAddr addr;
  uint64_t nonce = 0;
  zcx_peer_info_t peer{};
};

// What each socket of a connection presents to the acceptor (128 bytes, docs/WIRE.md).
struct Hello {
  uint8_t nsocks = 0, index = 0;
  uint64_t secret = 0, nonce = 0, conn_id = 0;
  Layout layout;
  zcx_peer_info_t peer{};
};

struct Connector {
  HandleInfo target;
  uint64_t conn_id = 0;
  Layout layout;
  std::array<UniqueFd, kMaxSocks> fds;
  std::array<int, kMaxSocks> stage{};  // 0 connecting, 1 sending hello, 2 done
  std::array<size_t, kMaxSocks> sent{};
  std::array<std::array<uint8_t, kHelloBytes>, kMaxSocks> hello{};
  int64_t deadline_ns = 0;
};

Context::Context() = default;
Context::~Context() = default;

struct PendingSock {
  UniqueFd fd;
  SockAddr from;
  std::array<uint8_t, kHelloBytes> buf{};
  size_t got = 0;
  int64_t deadline_ns = 0;
};

struct Group {
  Hello first;
  std::array<UniqueFd, kMaxSocks> fds;
  int have = 0;
  int64_t deadline_ns = 0;
};

struct Listener {
  uint32_t tag = kListenTag;
  Context* ctx = nullptr;
  UniqueFd fd;
  SockAddr bound;
  uint64_t nonce = 0;
  std::deque<PendingSock> pending;
  std::map<uint64_t, Group> groups;
  std::deque<std::unique_ptr<Comm>> ready;
  int64_t last_warn_ns = 0;
  int suppressed = 0;
};

namespace {

constexpr size_t kMaxPendingSocks = 256;
constexpr int64_t kWarnIntervalNs = 1000000000;

int64_t timeout_ns() { return params::timeout_ms() * 1000000; }

Status handle_write(const Context* ctx, const Listener* l, void* handle) {
  uint8_t payload[kHandlePayloadMax] = {};
  wire::Writer w(payload, sizeof payload);
  uint8_t addr[16] = {};
  const sockaddr* sa = l->bound.sa();
  if (sa->sa_family == AF_INET)
    memcpy(addr, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  else
    memcpy(addr, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  w.u8(sa->sa_family == AF_INET ? 4 : 6);
  w.bytes(addr, sizeof addr);
  w.u16(static_cast<uint16_t>(l->bound.port()));
  w.u64(l->nonce);
  w.u32(static_cast<uint32_t>(ctx->self.rank));
  w.u32(static_cast<uint32_t>(ctx->pid));
  char host[64] = {};
  snprintf(host, sizeof host, "%s", ctx->self.host);
  w.str(host);
  if (!w.ok()) return set_error(Status::kInternal, kLogTcp, "tcp handle does not fit");
  return handle_encode(ZCX_PROVIDER_ID_TCP, payload, w.size(), handle);
}

Status handle_read(const void* handle, HandleInfo* out) {
  uint8_t payload[kHandlePayloadMax];
  size_t len = 0;
  ZCX_TRY(handle_decode(handle, ZCX_PROVIDER_ID_TCP, payload, sizeof payload, &len));
  wire::Reader r(payload, len);
  uint8_t family = r.u8();
  uint8_t addr[16];
  r.bytes(addr, sizeof addr);
  int port = r.u16();
  out->nonce = r.u64();
  out->peer.rank = static_cast<int32_t>(r.u32());
  out->peer.pid = static_cast<int32_t>(r.u32());
  std::string host = r.str(ZCX_HOST_NAME_BYTES - 1);
  if (!r.ok() || (family != 4 && family != 6) || port == 0)
    return set_error(Status::kInvalidArg, kLogTcp, "tcp connection handle is corrupt");
  snprintf(out->peer.host, sizeof out->peer.host, "%s", host.c_str());
  SockAddr& a = out->addr;
  memset(&a.storage, 0, sizeof a.storage);
  if (family == 4) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
    in->sin_family = AF_INET;
    memcpy(&in->sin_addr, addr, 4);
    a.len = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    in6->sin6_family = AF_INET6;
    memcpy(&in6->sin6_addr, addr, 16);
    a.len = sizeof(sockaddr_in6);
  }
  a.set_port(port);
  return Status::kSuccess;
}

void hello_write(const Context* ctx, const Connector& c, int index, uint8_t* out) {
  wire::Writer w(out, kHelloBytes);
  w.u32(kHelloMagic);
  w.u16(kWireVersion);
  w.u8(static_cast<uint8_t>(c.layout.nsocks));
  w.u8(static_cast<uint8_t>(index));
  w.u64(ctx->self.secret);
  w.u64(c.target.nonce);
  w.u64(c.conn_id);
  w.u32(static_cast<uint32_t>(ctx->self.rank));
  w.u32(static_cast<uint32_t>(ctx->pid));
  w.u64(c.layout.inline_max);
  w.u64(c.layout.chunk);
  put_host(w, ctx->self.host);
  w.u64(0);  // reserved
}

// Parses and checks a hello; on failure *why says what was wrong (not the secret itself).
bool hello_read(const Listener* l, const uint8_t* in, Hello* h, const char** why) {
  wire::Reader r(in, kHelloBytes);
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  h->nsocks = r.u8();
  h->index = r.u8();
  h->secret = r.u64();
  h->nonce = r.u64();
  h->conn_id = r.u64();
  h->peer.rank = static_cast<int32_t>(r.u32());
  h->peer.pid = static_cast<int32_t>(r.u32());
  h->layout.inline_max = r.u64();
  h->layout.chunk = r.u64();
  get_host(r, h->peer.host);
  h->layout.nsocks = h->nsocks;
  *why = !r.ok() ? "short hello"
         : magic != kHelloMagic ? "not a zcx tcp connection (wrong magic)"
         : version != kWireVersion ? "wire version mismatch"
         : !same_secret(h->secret, l->ctx->self.secret) ? "wrong job secret"
         : h->nonce != l->nonce ? "connection meant for another listener (nonce)"
         : h->nsocks < 1 || h->nsocks > kMaxSocks || h->index >= h->nsocks ? "bad socket count"
         : h->layout.inline_max > kMaxInline ? "bad inline size"
         : h->layout.chunk < 4096 || h->layout.chunk > (size_t{1} << 30) ? "bad chunk size"
         : nullptr;
  return *why == nullptr;
}

void reject(Listener* l, const SockAddr& from, const char* why) {
  int64_t now = now_ns();
  if (now - l->last_warn_ns < kWarnIntervalNs) {
    ++l->suppressed;
    return;
  }
  ZCX_WARN(kLogTcp,
           "tcp listener %s rejected a connection from %s: %s (%d similar rejections "
           "suppressed); check that every process of the job shares ZCX_SECRET and zcx version",
           l->bound.to_string().c_str(), from.to_string().c_str(), why, l->suppressed);
  l->last_warn_ns = now;
  l->suppressed = 0;
}

void tune_socket(int fd) {
  int snd = static_cast<int>(config_sndbuf()), rcv = static_cast<int>(config_rcvbuf());
  if (snd > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof snd);
  if (rcv > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
}

}  // namespace

void put_host(wire::Writer& w, const char* host) {
  char h[ZCX_HOST_NAME_BYTES] = {};
  snprintf(h, sizeof h, "%s", host);
  w.bytes(h, sizeof h);
}

void get_host(wire::Reader& r, char* host) {
  r.bytes(host, ZCX_HOST_NAME_BYTES);
  host[ZCX_HOST_NAME_BYTES - 1] = '\0';
  for (int i = 0; host[i] != '\0'; ++i)
    if (host[i] < 0x20 || host[i] > 0x7e) host[i] = '?';  // printable in logs
}

bool same_secret(uint64_t a, uint64_t b) {
  volatile uint64_t diff = a ^ b;
  return diff == 0;
}

bool ep_is_listener(const void* p) {
  return p != nullptr && static_cast<const Listener*>(p)->tag == kListenTag;
}

Status ep_listen(Context* ctx, void* handle, Listener** out) {
  auto l = std::make_unique<Listener>();
  l->ctx = ctx;
  l->nonce = random_u64();
  ZCX_TRY(socket_listen(ctx->addr, 1024, &l->fd, &l->bound));
  ZCX_TRY(handle_write(ctx, l.get(), handle));
  ZCX_INFO(kLogTcp, "tcp listening on %s", l->bound.to_string().c_str());
  *out = l.release();
  return Status::kSuccess;
}

void ep_close_listen(Listener* l) {
  l->tag = kDeadTag;
  delete l;
}

namespace {

Status connector_start(Context* ctx, const HandleInfo& target, std::unique_ptr<Connector>* out) {
  auto c = std::make_unique<Connector>();
  c->target = target;
  c->conn_id = random_u64();
  c->layout = Layout{config_nsocks(sockaddr_is_this_host(target.addr, ctx->own_addrs)),
                     config_inline(), config_chunk()};
  c->deadline_ns = now_ns() + timeout_ns();
  for (int i = 0; i < c->layout.nsocks; ++i) {
    Status s = socket_connect_start(target.addr, &c->fds[i]);
    if (failed(s))
      return set_error(s, kLogTcp, "tcp connect to %s at %s failed: %s",
                       describe_peer(target.peer).c_str(), target.addr.to_string().c_str(),
                       last_error());
    tune_socket(c->fds[i].get());
    hello_write(ctx, *c, i, c->hello[i].data());
  }
  *out = std::move(c);
  return Status::kSuccess;
}

// Advances one socket of a connector; kSuccess when its hello is fully sent.
Status connector_step(Connector* c, int i) {
  if (c->stage[i] == 0) {
    Status s = socket_connect_done(c->fds[i].get(), c->target.addr);
    if (s == Status::kInProgress) return s;
    if (failed(s))
      return set_error(s, kLogTcp, "tcp connect to %s failed: %s; is the peer alive?",
                       describe_peer(c->target.peer).c_str(), last_error());
    c->stage[i] = 1;
  }
  while (c->stage[i] == 1) {
    ssize_t n = send(c->fds[i].get(), c->hello[i].data() + c->sent[i], kHelloBytes - c->sent[i],
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Status::kInProgress;
    if (n <= 0)
      return set_error(Status::kRemote, kLogTcp, "tcp handshake with %s failed: %s",
                       describe_peer(c->target.peer).c_str(), errno_text(errno));
    c->sent[i] += static_cast<size_t>(n);
    if (c->sent[i] == kHelloBytes) c->stage[i] = 2;
  }
  return Status::kSuccess;
}

Status connector_progress(Context* ctx, Connector* c, Comm** out) {
  bool all = true;
  for (int i = 0; i < c->layout.nsocks; ++i) {
    Status s = connector_step(c, i);
    if (failed(s)) return s;
    all = all && s == Status::kSuccess;
  }
  if (!all) {
    if (now_ns() > c->deadline_ns)
      return set_error(Status::kTimeout, kLogTcp,
                       "tcp connect to %s at %s timed out (ZCX_TIMEOUT)",
                       describe_peer(c->target.peer).c_str(), c->target.addr.to_string().c_str());
    return Status::kSuccess;
  }
  *out = comm_create(ctx, true, c->target.peer, c->layout, c->fds.data()).release();
  return Status::kSuccess;
}

}  // namespace

Status ep_connect(Context* ctx, const void* handle, Comm** out) {
  *out = nullptr;
  HandleInfo target;
  ZCX_TRY(handle_read(handle, &target));
  std::string key(static_cast<const char*>(handle), ZCX_HANDLE_BYTES);
  std::lock_guard<std::mutex> lock(ctx->mu);
  auto it = ctx->connecting.find(key);
  if (it == ctx->connecting.end()) {
    std::unique_ptr<Connector> c;
    ZCX_TRY(connector_start(ctx, target, &c));
    it = ctx->connecting.emplace(key, std::move(c)).first;
  }
  Status s = connector_progress(ctx, it->second.get(), out);
  if (failed(s) || *out != nullptr) ctx->connecting.erase(it);
  return s;
}

namespace {

void accept_new(Listener* l) {
  for (int i = 0; i < 64; ++i) {
    PendingSock p;
    Status s = socket_accept(l->fd.get(), &p.fd, &p.from);
    if (s != Status::kSuccess) return;  // none pending, or a transient accept error
    if (l->pending.size() >= kMaxPendingSocks) {  // a flood of silent clients: oldest goes
      reject(l, l->pending.front().from, "too many connections waiting for their hello");
      l->pending.pop_front();
    }
    tune_socket(p.fd.get());
    p.deadline_ns = now_ns() + timeout_ns();
    l->pending.push_back(std::move(p));
  }
}

// Reads what has arrived of a hello; true when the socket is finished with (kept or dropped).
bool pending_step(Listener* l, PendingSock& p) {
  while (p.got < kHelloBytes) {
    ssize_t n = recv(p.fd.get(), p.buf.data() + p.got, kHelloBytes - p.got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (now_ns() <= p.deadline_ns) return false;
      reject(l, p.from, "no complete hello within ZCX_TIMEOUT");
      return true;
    }
    if (n <= 0) {
      reject(l, p.from, n == 0 ? "closed during the hello" : "error during the hello");
      return true;
    }
    p.got += static_cast<size_t>(n);
    if (p.got >= 4 && wire::Reader(p.buf.data(), 4).u32() != kHelloMagic) {
      reject(l, p.from, "not a zcx tcp connection (wrong magic)");  // e.g. an HTTP scraper
      return true;
    }
  }
  Hello h;
  const char* why = nullptr;
  if (!hello_read(l, p.buf.data(), &h, &why)) {
    reject(l, p.from, why);
    return true;
  }
  Group& g = l->groups[h.conn_id];
  if (g.have == 0) {
    g.first = h;
    g.deadline_ns = now_ns() + timeout_ns();
  } else if (h.nsocks != g.first.nsocks || g.fds[h.index].valid()) {
    reject(l, p.from, "inconsistent socket index or count within one connection");
    return true;
  }
  g.fds[h.index] = std::move(p.fd);
  ++g.have;
  return true;
}

void groups_collect(Listener* l) {
  int64_t now = now_ns();
  for (auto it = l->groups.begin(); it != l->groups.end();) {
    Group& g = it->second;
    if (g.have == g.first.nsocks) {
      l->ready.push_back(comm_create(l->ctx, false, g.first.peer, g.first.layout, g.fds.data()));
      it = l->groups.erase(it);
    } else if (now > g.deadline_ns) {
      ZCX_WARN(kLogTcp, "tcp listener %s dropped a connection from %s: only %d of %d sockets "
               "arrived within ZCX_TIMEOUT", l->bound.to_string().c_str(),
               describe_peer(g.first.peer).c_str(), g.have, g.first.nsocks);
      it = l->groups.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

Status ep_accept(Listener* l, Comm** out) {
  *out = nullptr;
  accept_new(l);
  for (auto it = l->pending.begin(); it != l->pending.end();)
    it = pending_step(l, *it) ? l->pending.erase(it) : it + 1;
  groups_collect(l);
  if (!l->ready.empty()) {
    *out = l->ready.front().release();
    l->ready.pop_front();
  }
  return Status::kSuccess;
}

}  // namespace zcx::tcp
