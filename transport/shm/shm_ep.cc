// Connection set-up: an abstract-namespace Unix socket carries one hello with the memfd
// (SCM_RIGHTS) from the connector (sender) to the acceptor (receiver); SO_PEERCRED checks
// both ends. Nothing is ever created in /dev/shm. Wire formats: docs/WIRE.md "shm".
#include "base/handle.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config_vars.h"
#include "common/random.h"
#include "common/unix_socket.h"
#include "common/wire.h"
#include "shm/shm.h"

#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

namespace zcx::shm {
namespace {

constexpr uint32_t kHelloMagic = 0x4c454853;  // "SHEL"
constexpr uint32_t kAckMagic = 0x4b434153;    // "SACK"
constexpr size_t kHelloBytes = 192;
enum AckCode : uint32_t { kAckOk = 0, kAckSecret = 1, kAckVersion = 2, kAckBad = 3 };

struct HandleInfo {
  uint8_t boot_id[16] = {};
  uint64_t nonce = 0;
  int pid = 0;
  int rank = -1;
  uint64_t probe_addr = 0;
  std::string host;
};

struct Hello {
  uint32_t magic = 0, version = 0;
  uint64_t secret = 0, listen_nonce = 0, seg_nonce = 0;
  int rank = -1;
  int pid = 0;
  uint32_t nslots = 0, slot_bytes = 0, nchunks = 0, chunk_bytes = 0;
  uint64_t probe_addr = 0;
  std::string host;
};

// Reads 8 bytes at `addr` in process `pid`: true when CMA to it works and the value matches.
bool cma_probe(int pid, uint64_t addr, uint64_t expect) {
  uint64_t v = 0;
  iovec local{&v, sizeof(v)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(v)};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof(v) && v == expect;
}

Status handle_read(const void* handle, HandleInfo* h) {
  uint8_t payload[kHandlePayloadMax];
  size_t len = 0;
  ZCX_TRY(handle_decode(handle, ZCX_PROVIDER_ID_SHM, payload, sizeof(payload), &len));
  wire::Reader r(payload, len);
  r.bytes(h->boot_id, 16);
  h->nonce = r.u64();
  h->pid = static_cast<int>(r.u32());
  h->rank = static_cast<int>(r.u32());
  h->probe_addr = r.u64();
  h->host = r.str(ZCX_HOST_NAME_BYTES - 1);
  if (!r.ok() || h->pid <= 0)
    return set_error(Status::kInvalidArg, kLogShm, "shm connection handle is malformed");
  return Status::kSuccess;
}

void hello_write(const Hello& h, wire::Writer* w) {
  w->u32(h.magic);
  w->u32(h.version);
  w->u64(h.secret);
  w->u64(h.listen_nonce);
  w->u64(h.seg_nonce);
  w->u32(static_cast<uint32_t>(h.rank));
  w->u32(static_cast<uint32_t>(h.pid));
  w->u32(h.nslots);
  w->u32(h.slot_bytes);
  w->u32(h.nchunks);
  w->u32(h.chunk_bytes);
  w->u64(h.probe_addr);
  w->str(h.host);
}

bool hello_read(const void* buf, size_t len, Hello* h) {
  wire::Reader r(buf, len);
  h->magic = r.u32();
  h->version = r.u32();
  h->secret = r.u64();
  h->listen_nonce = r.u64();
  h->seg_nonce = r.u64();
  h->rank = static_cast<int>(r.u32());
  h->pid = static_cast<int>(r.u32());
  h->nslots = r.u32();
  h->slot_bytes = r.u32();
  h->nchunks = r.u32();
  h->chunk_bytes = r.u32();
  h->probe_addr = r.u64();
  h->host = r.str(ZCX_HOST_NAME_BYTES - 1);
  return r.ok() && h->magic == kHelloMagic;
}

Status send_with_fd(int sock, const void* buf, size_t len, int fd) {
  Status st = unix_socket::send_packet(sock, buf, len, fd);
  if (st == Status::kSuccess || st == Status::kInProgress) return st;
  return set_error(Status::kSystem, kLogShm, "sending the shm hello failed: %s", last_error());
}

// kInProgress when nothing has arrived; *fd gets the first passed descriptor (others closed).
Status recv_with_fd(int sock, void* buf, size_t cap, size_t* len, UniqueFd* fd) {
  Status st = unix_socket::recv_packet(sock, buf, cap, len, fd);
  if (st == Status::kSuccess || st == Status::kInProgress) return st;
  return set_error_quiet(st, "shm handshake with the peer: %s", last_error());
}

void send_ack(int sock, uint32_t code) {
  uint8_t buf[8];
  wire::Writer w(buf, sizeof(buf));
  w.u32(kAckMagic);
  w.u32(code);
  ssize_t rc = send(sock, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)rc;  // a connector that went away learns nothing; its own checks report it
}

void segment_init(Comm* c, uint64_t nonce) {
  SegHeader* h = new (c->map.data()) SegHeader{};
  h->magic = kSegMagic;
  h->version = kWireVersion;
  h->nslots = c->layout.nslots;
  h->slot_bytes = c->layout.slot_bytes;
  h->nchunks = c->layout.nchunks;
  h->chunk_bytes = c->layout.chunk_bytes;
  h->total_bytes = c->layout.total;
  h->nonce = nonce;
  new (c->map.data() + c->layout.sender_off) SenderLine{};
  new (c->map.data() + c->layout.receiver_off) ReceiverLine{};
}

}  // namespace

Status comm_attach_views(Comm* c) {
  uint8_t* base = c->map.data();
  c->hdr = reinterpret_cast<SegHeader*>(base);
  c->sline = reinterpret_cast<SenderLine*>(base + c->layout.sender_off);
  c->rline = reinterpret_cast<ReceiverLine*>(base + c->layout.receiver_off);
  c->slots = base + c->layout.slots_off;
  c->chunks = base + c->layout.chunks_off;
  c->last_progress_ns = c->last_check_ns = now_ns();
  c->spin_limit = cfg_spin_before_yield();
  c->timeout_ms = params::timeout_ms();
  c->large = large_mode();
  c->cut = stream_cut();
  c->cma_min = cma_threshold();
  // Default: above the chunk ring. A pipelined send that fits the ring completes without the
  // receiver's help; a CMA send waits for the receiver's rendezvous, so choosing CMA below
  // that size could hold a send that callers expect to finish on its own.
  c->adapt_min = cfg_adapt_min() != 0 ? cfg_adapt_min() : c->layout.ring_bytes() + 1;
  c->stream_min = cfg_stream_min();
  return Status::kSuccess;
}

Status listen(Context* ctx, void* handle, ListenComm** out) {
  auto lc = std::make_unique<ListenComm>();
  lc->ctx = ctx;
  lc->nonce = random_u64();
  lc->sock.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!lc->sock.valid())
    return set_error(Status::kSystem, kLogShm, "socket(AF_UNIX) failed: %s", errno_text(errno));
  sockaddr_un sa;
  socklen_t len = unix_socket::abstract_addr("zcx-shm", lc->nonce, &sa);
  ZCX_SYSCHECK(bind(lc->sock.get(), reinterpret_cast<sockaddr*>(&sa), len), kLogShm,
               "bind(abstract unix socket)");
  ZCX_SYSCHECK(::listen(lc->sock.get(), 128), kLogShm, "listen(abstract unix socket)");
  uint8_t payload[kHandlePayloadMax];
  wire::Writer w(payload, sizeof(payload));
  w.bytes(ctx->boot_id, 16);
  w.u64(lc->nonce);
  w.u32(static_cast<uint32_t>(getpid()));
  w.u32(static_cast<uint32_t>(ctx->rank));
  w.u64(reinterpret_cast<uint64_t>(&lc->nonce));
  w.str(ctx->host.substr(0, ZCX_HOST_NAME_BYTES - 1));
  if (!w.ok()) return set_error(Status::kInternal, kLogShm, "shm handle does not fit");
  ZCX_TRY(handle_encode(ZCX_PROVIDER_ID_SHM, payload, w.size(), handle));
  *out = lc.release();
  return Status::kSuccess;
}

namespace {

Status connect_socket(const HandleInfo& h, UniqueFd* fd) {
  UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid())
    return set_error(Status::kSystem, kLogShm, "socket(AF_UNIX) failed: %s", errno_text(errno));
  sockaddr_un sa;
  socklen_t len = unix_socket::abstract_addr("zcx-shm", h.nonce, &sa);
  int rc;
  do {
    rc = ::connect(s.get(), reinterpret_cast<sockaddr*>(&sa), len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EAGAIN) return Status::kInProgress;  // backlog full: retry
  if (rc != 0)
    return set_error(Status::kNoDevice, kLogShm,
                     "shm connect to rank %d (host %s, pid %d) failed: %s; the listener is "
                     "gone or in another network namespace", h.rank, h.host.c_str(), h.pid,
                     errno_text(errno));
  ZCX_TRY(unix_socket::check_peer_cred(s.get(), h.pid, "shm", "listener", kLogShm));
  *fd = std::move(s);
  return Status::kSuccess;
}

Status comm_create_segment(Comm* c, UniqueFd* fd) {
  ZCX_TRY(layout_make(cfg_nslots(), cfg_slot_bytes(), cfg_nchunks(), cfg_chunk_bytes(),
                      &c->layout));
  ZCX_TRY(memfd_create_reserved(c->layout.total, "an shm connection", kLogShm, fd));
  ZCX_TRY(c->map.map(fd->get(), c->layout.total));
  return comm_attach_views(c);
}

}  // namespace

Status connect(Context* ctx, const void* handle, Comm** out) {
  *out = nullptr;
  HandleInfo h;
  ZCX_TRY(handle_read(handle, &h));
  if (memcmp(h.boot_id, ctx->boot_id, 16) != 0)
    return set_error(Status::kNoDevice, kLogShm,
                     "shm cannot reach rank %d (host %s): it runs on another host or kernel "
                     "(boot id differs); use a network provider", h.rank, h.host.c_str());
  UniqueFd sock;
  Status st = connect_socket(h, &sock);
  if (st == Status::kInProgress) return Status::kSuccess;
  ZCX_TRY(st);
  auto c = std::make_unique<Comm>();
  c->is_send = true;
  c->ctx = ctx;
  UniqueFd seg;
  ZCX_TRY(comm_create_segment(c.get(), &seg));
  uint64_t seg_nonce = random_u64();
  segment_init(c.get(), seg_nonce);
  c->cma_probe = seg_nonce;
  c->cma_ok = cma_probe(h.pid, h.probe_addr, h.nonce);
  ZCX_TRY(c->watch.open(h.pid));
  Hello hello{kHelloMagic, kWireVersion, ctx->secret, h.nonce, seg_nonce, ctx->rank,
              static_cast<int>(getpid()), c->layout.nslots, c->layout.slot_bytes,
              c->layout.nchunks, c->layout.chunk_bytes,
              reinterpret_cast<uint64_t>(&c->cma_probe), ctx->host.substr(0, 63)};
  uint8_t buf[kHelloBytes];
  wire::Writer w(buf, sizeof(buf));
  hello_write(hello, &w);
  st = send_with_fd(sock.get(), buf, w.size(), seg.get());
  if (st == Status::kInProgress) return Status::kSuccess;  // retried from scratch
  ZCX_TRY(st);
  c->peer.rank = h.rank;
  c->peer.pid = h.pid;
  snprintf(c->peer.host, sizeof(c->peer.host), "%s", h.host.c_str());
  c->sock = std::move(sock);
  ZCX_INFO(kLogShm, "shm send comm to %s: %zu-byte memfd segment, CMA %s",
           peer_name(c.get()).c_str(), c->layout.total, c->cma_ok ? "permitted" : "denied");
  *out = c.release();
  return Status::kSuccess;
}

namespace {

uint32_t hello_verdict(const ListenComm* lc, const Hello& h) {
  if (h.version != kWireVersion) return kAckVersion;
  if (h.secret != lc->ctx->secret) return kAckSecret;
  if (h.listen_nonce != lc->nonce || h.pid <= 0) return kAckBad;
  return kAckOk;
}

Status attach_segment(Comm* c, const Hello& h, int fd) {
  ZCX_TRY(layout_make(h.nslots, h.slot_bytes, h.nchunks, h.chunk_bytes, &c->layout));
  ZCX_TRY(memfd_check(fd, c->layout.total, kLogShm));
  ZCX_TRY(c->map.map(fd, c->layout.total));
  ZCX_TRY(comm_attach_views(c));
  const SegHeader* s = c->hdr;
  if (s->magic != kSegMagic || s->version != kWireVersion || s->nslots != h.nslots ||
      s->slot_bytes != h.slot_bytes || s->nchunks != h.nchunks ||
      s->chunk_bytes != h.chunk_bytes || s->total_bytes != c->layout.total ||
      s->nonce != h.seg_nonce)
    return set_error(Status::kProtocol, kLogShm, "shm segment header does not match the hello");
  return Status::kSuccess;
}

// One pending socket: kInProgress until its hello arrives; an error drops the connection.
Status accept_one(ListenComm* lc, int sock, Comm** out) {
  uint8_t buf[kHelloBytes];
  size_t len = 0;
  UniqueFd seg;
  ZCX_TRY(recv_with_fd(sock, buf, sizeof(buf), &len, &seg));
  Hello h;
  if (!hello_read(buf, len, &h) || !seg.valid()) {
    send_ack(sock, kAckBad);
    return set_error(Status::kProtocol, kLogShm, "malformed shm hello dropped");
  }
  uint32_t verdict = hello_verdict(lc, h);
  if (verdict != kAckOk) {
    send_ack(sock, verdict);
    return set_error(Status::kAuth, kLogShm,
                     "shm connection from rank %d (pid %d) rejected: %s", h.rank, h.pid,
                     verdict == kAckSecret ? "wrong job secret" : verdict == kAckVersion
                         ? "wire version differs" : "handshake fields invalid");
  }
  Status st = unix_socket::check_peer_cred(sock, h.pid, "shm", "connector", kLogShm);
  auto c = std::make_unique<Comm>();
  c->ctx = lc->ctx;
  if (ok(st)) st = attach_segment(c.get(), h, seg.get());
  // A connector that already exited may have sent its messages and closed before this
  // accept: they wait in the segment, so the connection is taken all the same (the watch
  // then reads it gone) and the receives drain them before they report the close.
  if (ok(st)) (void)c->watch.open(h.pid);
  if (!ok(st)) {
    send_ack(sock, kAckBad);
    return st;
  }
  c->peer.rank = h.rank;
  c->peer.pid = h.pid;
  snprintf(c->peer.host, sizeof(c->peer.host), "%s", h.host.c_str());
  c->rline->cma_ok.store(cma_probe(h.pid, h.probe_addr, h.seg_nonce) ? 1 : 0,
                         std::memory_order_release);
  send_ack(sock, kAckOk);
  *out = c.release();
  return Status::kSuccess;
}

}  // namespace

Status accept(ListenComm* lc, Comm** out) {
  *out = nullptr;
  for (;;) {
    int fd = accept4(lc->sock.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    lc->pending.emplace_back(fd);
  }
  for (size_t i = 0; i < lc->pending.size(); ++i) {
    Status st = accept_one(lc, lc->pending[i].get(), out);
    if (st == Status::kInProgress) continue;
    lc->pending.erase(lc->pending.begin() + static_cast<long>(i));
    if (ok(st)) return st;
    ZCX_WARN(kLogShm, "shm accept dropped a connection: %s", last_error());
    --i;
  }
  return Status::kSuccess;
}

// Connector side: the acceptor's answer, read lazily from progress.
Status check_ack(Comm* c) {
  uint8_t buf[8];
  ssize_t n = recv(c->sock.get(), buf, sizeof(buf), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return Status::kSuccess;
  wire::Reader r(buf, n > 0 ? static_cast<size_t>(n) : 0);
  uint32_t magic = r.u32(), code = r.u32();
  c->sock.reset();
  if (r.ok() && magic == kAckMagic && code == kAckOk) return Status::kSuccess;
  const char* why = !r.ok() ? "it closed the handshake without an answer"
                    : code == kAckSecret ? "wrong job secret (check ZCX_SECRET)"
                    : code == kAckVersion ? "zcx shm wire versions differ"
                                          : "it found the handshake or segment invalid";
  return set_error(Status::kAuth, kLogShm, "%s rejected the shm connection: %s",
                   peer_name(c).c_str(), why);
}

std::string peer_name(const Comm* c) {
  char buf[160];
  snprintf(buf, sizeof(buf), "peer rank %d (host %s, pid %d)", c->peer.rank, c->peer.host,
           c->peer.pid);
  return buf;
}

}  // namespace zcx::shm
