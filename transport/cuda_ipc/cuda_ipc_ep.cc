// Connection set-up of the cuda_ipc provider: an abstract-namespace SOCK_SEQPACKET Unix
// socket per one-directional connection. The connector (sender) sends HELLO with the job
// secret; SO_PEERCRED must show the pid each side announced and our own uid. Nothing is
// created in the file system. Wire formats: docs/WIRE.md "cuda_ipc".
#include "base/handle.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config_vars.h"
#include "common/random.h"
#include "common/unix_socket.h"
#include "common/wire.h"
#include "cuda_ipc/cuda_ipc.h"

#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

namespace zcx::cuda_ipc {
namespace {

constexpr uint32_t kHelloMagic = 0x48504943;  // "CIPH"

struct HandleInfo {
  uint64_t nonce = 0;
  int pid = 0;
  int rank = -1;
  std::string host;
};

struct Hello {
  uint32_t magic = 0, version = 0;
  uint64_t secret = 0, nonce = 0;
  int rank = -1, pid = 0, device = 0;
  std::string host;
};

Status handle_read(const void* handle, HandleInfo* h) {
  uint8_t payload[kHandlePayloadMax];
  size_t len = 0;
  ZCX_TRY(handle_decode(handle, ZCX_PROVIDER_ID_CUDA_IPC, payload, sizeof(payload), &len));
  wire::Reader r(payload, len);
  h->nonce = r.u64();
  h->pid = static_cast<int>(r.u32());
  h->rank = static_cast<int>(r.u32());
  h->host = r.str(ZCX_HOST_NAME_BYTES - 1);
  if (!r.ok() || h->pid <= 0)
    return set_error(Status::kInvalidArg, kLogCuda, "cuda_ipc connection handle is malformed");
  return Status::kSuccess;
}

size_t hello_write(const Hello& h, uint8_t* buf, size_t cap) {
  wire::Writer w(buf, cap);
  w.u32(h.magic);
  w.u32(h.version);
  w.u64(h.secret);
  w.u64(h.nonce);
  w.u32(static_cast<uint32_t>(h.rank));
  w.u32(static_cast<uint32_t>(h.pid));
  w.u32(static_cast<uint32_t>(h.device));
  w.str(h.host);
  return w.ok() ? w.size() : 0;
}

bool hello_read(const void* buf, size_t len, Hello* h) {
  wire::Reader r(buf, len);
  h->magic = r.u32();
  h->version = r.u32();
  h->secret = r.u64();
  h->nonce = r.u64();
  h->rank = static_cast<int>(r.u32());
  h->pid = static_cast<int>(r.u32());
  h->device = static_cast<int>(r.u32());
  h->host = r.str(ZCX_HOST_NAME_BYTES - 1);
  return r.ok() && h->magic == kHelloMagic && h->pid > 0;
}

void send_ack(int sock, uint32_t code) {
  uint8_t buf[8];
  wire::Writer w(buf, sizeof(buf));
  w.u32(kAckMagic);
  w.u32(code);
  (void)packet_send(sock, buf, sizeof(buf), -1);  // a connector that left learns nothing
}

Status comm_new(Context* ctx, int dev, bool is_send, Comm** out) {
  auto* c = new (std::nothrow) Comm;
  if (c == nullptr) return set_error(Status::kNoMemory, kLogCuda, "cuda_ipc: out of memory");
  c->ctx = ctx;
  c->device = dev;
  c->is_send = is_send;
  c->last_progress_ns = now_ns();
  c->timeout_ms = params::timeout_ms();
  *out = c;
  CudaDeviceGuard guard(dev);
  Status st = guard.status();
  if (ok(st))
    st = cuda_check(ctx->api->stream_create_with_flags(&c->stream, cudaStreamNonBlocking),
                    "cudaStreamCreateWithFlags(cuda_ipc copies)");
  if (!ok(st)) {
    delete c;
    *out = nullptr;
  }
  return st;
}

}  // namespace

static_assert(kMaxPieces <= unix_socket::kMaxPacketFds);

namespace {
// The socket helpers' quiet errors, worded for the control channel (`what`: packet, socket).
Status control_status(Status st, const char* what) {
  if (st == Status::kSuccess || st == Status::kInProgress) return st;
  return set_error_quiet(st, "cuda_ipc control %s: %s", what, last_error());
}
}  // namespace

Status packet_send(int sock, const void* buf, size_t len, int fd) {
  return control_status(unix_socket::send_packet(sock, buf, len, fd), "packet");
}

Status packet_send_fds(int sock, const void* buf, size_t len, const int* fds, size_t nfds) {
  return control_status(unix_socket::send_packet_fds(sock, buf, len, fds, nfds), "packet");
}

Status packet_recv(int sock, void* buf, size_t cap, size_t* len, UniqueFd* fd) {
  return control_status(unix_socket::recv_packet(sock, buf, cap, len, fd), "socket");
}

Status packet_recv_fds(int sock, void* buf, size_t cap, size_t* len, std::vector<UniqueFd>* fds) {
  return control_status(unix_socket::recv_packet_fds(sock, buf, cap, len, fds), "socket");
}

Status listen(Context* ctx, int dev, void* handle, ListenComm** out) {
  auto lc = std::unique_ptr<ListenComm>(new (std::nothrow) ListenComm);
  if (!lc) return set_error(Status::kNoMemory, kLogCuda, "cuda_ipc listen: out of memory");
  lc->ctx = ctx;
  lc->device = dev;
  lc->nonce = random_u64();
  lc->sock.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!lc->sock.valid())
    return set_error(Status::kSystem, kLogCuda, "socket(AF_UNIX) failed: %s", errno_text(errno));
  sockaddr_un sa;
  socklen_t len = unix_socket::abstract_addr("zcx-cuda-ipc", lc->nonce, &sa);
  ZCX_SYSCHECK(bind(lc->sock.get(), reinterpret_cast<sockaddr*>(&sa), len), kLogCuda,
               "bind(abstract unix socket)");
  ZCX_SYSCHECK(::listen(lc->sock.get(), 128), kLogCuda, "listen(abstract unix socket)");
  uint8_t payload[kHandlePayloadMax];
  wire::Writer w(payload, sizeof(payload));
  w.u64(lc->nonce);
  w.u32(static_cast<uint32_t>(getpid()));
  w.u32(static_cast<uint32_t>(ctx->rank));
  w.str(ctx->host.substr(0, ZCX_HOST_NAME_BYTES - 1));
  ZCX_TRY(handle_encode(ZCX_PROVIDER_ID_CUDA_IPC, payload, w.size(), handle));
  *out = lc.release();
  return Status::kSuccess;
}

Status connect(Context* ctx, int dev, const void* handle, Comm** out) {
  *out = nullptr;
  HandleInfo h;
  ZCX_TRY(handle_read(handle, &h));
  UniqueFd sock(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!sock.valid())
    return set_error(Status::kSystem, kLogCuda, "socket(AF_UNIX) failed: %s", errno_text(errno));
  sockaddr_un sa;
  socklen_t len = unix_socket::abstract_addr("zcx-cuda-ipc", h.nonce, &sa);
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    if (errno == EAGAIN) return Status::kSuccess;  // backlog full: retry
    return set_error(Status::kRemote, kLogCuda,
                     "cuda_ipc connect to rank %d on %s (pid %d) failed: %s", h.rank,
                     h.host.c_str(), h.pid, errno_text(errno));
  }
  ZCX_TRY(unix_socket::check_peer_cred(sock.get(), h.pid, "cuda_ipc", "listener", kLogCuda));
  Hello hello{kHelloMagic, kWireVersion, ctx->secret, h.nonce, ctx->rank, getpid(), dev,
              ctx->host};
  uint8_t buf[kMaxPacket];
  size_t n = hello_write(hello, buf, sizeof buf);
  Status st = packet_send(sock.get(), buf, n, -1);
  if (!ok(st))  // a fresh SEQPACKET socket has room for one packet: anything else is fatal
    return set_error(Status::kRemote, kLogCuda, "cuda_ipc hello to rank %d on %s failed: %s",
                     h.rank, h.host.c_str(), last_error());
  Comm* c = nullptr;
  ZCX_TRY(comm_new(ctx, dev, true, &c));
  c->sock = std::move(sock);
  c->peer.rank = h.rank;
  c->peer.pid = h.pid;
  snprintf(c->peer.host, sizeof(c->peer.host), "%s", h.host.c_str());
  *out = c;
  return Status::kSuccess;
}

namespace {

uint32_t hello_verdict(const ListenComm* lc, const Hello& h) {
  if (h.version != kWireVersion) return kAckVersion;
  if (h.secret != lc->ctx->secret || h.nonce != lc->nonce) return kAckSecret;
  return kAckOk;
}

// kInProgress while the hello has not arrived.
Status accept_one(ListenComm* lc, UniqueFd& fd, Comm** out) {
  int sock = fd.get();
  uint8_t buf[kMaxPacket];
  size_t len = 0;
  UniqueFd none;
  Status st = packet_recv(sock, buf, sizeof buf, &len, &none);
  if (st == Status::kInProgress) return st;
  Hello h;
  if (!ok(st) || !hello_read(buf, len, &h))
    return set_error(Status::kProtocol, kLogCuda, "cuda_ipc accept: malformed hello");
  ZCX_TRY(unix_socket::check_peer_cred(sock, h.pid, "cuda_ipc", "connector", kLogCuda));
  uint32_t code = hello_verdict(lc, h);
  send_ack(sock, code);
  if (code != kAckOk)
    return set_error(Status::kAuth, kLogCuda,
                     "cuda_ipc: rank %d on %s (pid %d) presented a wrong %s", h.rank,
                     h.host.c_str(), h.pid, code == kAckVersion ? "wire version" : "job secret");
  Comm* c = nullptr;
  ZCX_TRY(comm_new(lc->ctx, lc->device, false, &c));
  c->sock = std::move(fd);
  c->peer.rank = h.rank;
  c->peer.pid = h.pid;
  snprintf(c->peer.host, sizeof(c->peer.host), "%s", h.host.c_str());
  *out = c;
  return Status::kSuccess;
}

}  // namespace

Status accept(ListenComm* lc, Comm** out) {
  *out = nullptr;
  int fd;
  while ((fd = accept4(lc->sock.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
    lc->pending.emplace_back(fd);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    return set_error(Status::kSystem, kLogCuda, "cuda_ipc accept4 failed: %s", errno_text(errno));
  for (size_t i = 0; i < lc->pending.size(); ++i) {
    Status st = accept_one(lc, lc->pending[i], out);
    if (st == Status::kInProgress) continue;
    lc->pending.erase(lc->pending.begin() + static_cast<std::ptrdiff_t>(i));
    return st;  // a bad connector fails this accept, never a later good one
  }
  return Status::kSuccess;
}

std::string peer_name(const Comm* c) {
  char text[128];
  snprintf(text, sizeof text, "rank %d on %s (pid %d)", c->peer.rank, c->peer.host,
           c->peer.pid);
  return text;
}

}  // namespace zcx::cuda_ipc
