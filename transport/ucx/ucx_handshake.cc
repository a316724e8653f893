// The zcx handshake of the ucx provider (docs/WIRE.md, "ucx provider") and endpoint helpers.
#include "ucx/ucx.h"

#include "common/clock.h"
#include "common/config_vars.h"
#include "common/wire.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace zcx::ucx {
namespace {

constexpr uint32_t kHelloMagic = 0x5558435a;  // "ZCXU" little-endian
constexpr uint16_t kHelloVersion = 2;  // 2: the ack carries the ucp_listener port
constexpr uint32_t kCloseMagic = 0x4358435a;  // "ZCXC" little-endian

}  // namespace

std::string PeerName::text() const {
  char buf[160];
  snprintf(buf, sizeof(buf), "rank %d (host %s, pid %d)", info.rank,
           info.host[0] ? info.host : "?", info.pid);
  return buf;
}

std::string hello_encode(const Hello& h) {
  std::string out(kHelloBytes, '\0');
  wire::Writer w(out.data(), out.size());
  w.u32(kHelloMagic);
  w.u16(kHelloVersion);
  w.u16(h.kind);
  w.u16(h.result);
  w.u64(h.secret);
  w.u64(h.nonce);
  w.u32(h.conn_id);
  w.u32(static_cast<uint32_t>(h.who.rank));
  w.u32(static_cast<uint32_t>(h.who.pid));
  size_t host_len = strnlen(h.who.host, sizeof(h.who.host));
  w.u16(static_cast<uint16_t>(host_len));
  w.bytes(h.who.host, ZCX_HOST_NAME_BYTES);
  w.u16(h.ucp_port);
  return out;
}

// Rejects anything but an exact-size message with our magic and version and a sane host.
Status hello_decode(const void* buf, size_t len, Hello* out) {
  if (len != kHelloBytes)
    return set_error(Status::kProtocol, kLog,
                     "ucx handshake: %zu bytes received, %zu expected (not a zcx peer, or a "
                     "different zcx version)", len, kHelloBytes);
  wire::Reader r(buf, len);
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  if (magic != kHelloMagic || version != kHelloVersion)
    return set_error(Status::kAuth, kLog,
                     "ucx handshake: magic 0x%08x version %u, expected 0x%08x version %u "
                     "(a different zcx version or not a zcx peer)", magic, version,
                     kHelloMagic, kHelloVersion);
  out->kind = r.u16();
  out->result = r.u16();
  out->secret = r.u64();
  out->nonce = r.u64();
  out->conn_id = r.u32();
  out->who.rank = static_cast<int>(r.u32());
  out->who.pid = static_cast<int>(r.u32());
  size_t host_len = r.u16();
  r.bytes(out->who.host, ZCX_HOST_NAME_BYTES);
  out->ucp_port = r.u16();
  if (!r.ok() || host_len >= ZCX_HOST_NAME_BYTES)
    return set_error(Status::kProtocol, kLog, "ucx handshake: malformed host field");
  std::fill(out->who.host + host_len, out->who.host + ZCX_HOST_NAME_BYTES, '\0');
  return Status::kSuccess;
}

std::string close_record(uint64_t count) {
  std::string out(kCloseRecordBytes, '\0');
  wire::Writer w(out.data(), out.size());
  w.u32(kCloseMagic);
  w.u32(0);
  w.u64(count);
  return out;
}

// Reads the side channel without blocking. EOF after a close record is a normal close; EOF
// without one means the peer process is gone.
Status poll_side_channel(CommBase* c) {
  char buf[kCloseRecordBytes];
  for (;;) {
    size_t want = kCloseRecordBytes - std::min(kCloseRecordBytes, c->close_rx.size());
    ssize_t n = recv(c->sock.get(), buf, want > 0 ? want : 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Status::kSuccess;
    if (n > 0 && want > 0) {
      c->close_rx.append(buf, static_cast<size_t>(n));
      if (c->close_rx.size() < kCloseRecordBytes) continue;
      wire::Reader r(c->close_rx.data(), c->close_rx.size());
      uint32_t magic = r.u32();
      (void)r.u32();
      c->peer_count = r.u64();
      if (magic != kCloseMagic)
        return set_error(Status::kProtocol, kLog, "ucx: %s wrote garbage on the side channel",
                         c->peer.text().c_str());
      c->peer_closed = true;
      c->peer_closed_ns = now_ns();
      continue;
    }
    if (n == 0 && c->peer_closed) return Status::kSuccess;
    if (n > 0) continue;  // bytes after the close record: ignore
    return set_error(Status::kRemote, kLog, "ucx: %s died or lost the connection (%s; it sent "
                     "no close record)", c->peer.text().c_str(),
                     n == 0 ? "its socket closed" : errno_text(errno));
  }
}

const char* ucs_text(const Ctx* ctx, ucs_status_t s) {
  const char* t = ctx->api != nullptr ? ctx->api->status_string(s) : nullptr;
  return t != nullptr ? t : "unknown UCX status";
}

void ep_error_callback(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* box = static_cast<EpError*>(arg);
  if (box->status == UCS_OK) box->status = status;
  if (box->any_failed != nullptr) *box->any_failed = true;
}

ucp_err_handler_t error_handler(EpError* box) {
  ucp_err_handler_t h{};
  h.cb = ep_error_callback;
  h.arg = box;
  return h;
}

void progress(Ctx* ctx) {
  for (int i = 0; i < ctx->spin; ++i)
    if (ctx->api->worker_progress(ctx->worker) == 0) break;
  if (!ctx->conn_requests.empty() || ctx->server_ep_failed) take_conn_requests(ctx);
}

// A graceful close flushes what was sent (a force close could drop data the peer has not
// received yet); a broken endpoint is force-closed. Both are bounded.
void ep_close(Ctx* ctx, ucp_ep_h ep, std::unique_ptr<EpError> box) {
  if (ep == nullptr) return;
  const UcxApi& api = *ctx->api;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = (box && box->status != UCS_OK) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t req = api.ep_close_nbx(ep, &param);
  if (!UCS_PTR_IS_PTR(req)) return;  // closed (or failed) at once: the ep is released
  int64_t bound_ms = std::min<int64_t>(zcx::params::timeout_ms(), 2000);
  Deadline dl = Deadline::after_ms(bound_ms);
  // progress(), not bare worker progress: a peer's connection request must be answered
  // meanwhile, or two sides closing their sockaddr endpoints at once wait on each other.
  while (api.request_check_status(req) == UCS_INPROGRESS && !dl.expired()) progress(ctx);
  bool closed = api.request_check_status(req) != UCS_INPROGRESS;
  api.request_free(req);
  if (closed) return;
  ZCX_INFO(kLog, "ucx: endpoint close did not finish in %lld ms; leaving it, and the worker, "
           "to UCX", static_cast<long long>(bound_ms));
  // The error callback may still fire, so its box must outlive this comm; and UCX aborts in
  // ucp_worker_destroy on an endpoint whose flush is still pending.
  (void)box.release();
  ctx->worker_unsafe = true;
}

}  // namespace zcx::ucx
