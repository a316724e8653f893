// Connections of the ucx provider. The handle carries the address of the side-channel
// listener plus a listener id (ucx.h explains why); docs/WIRE.md has the formats.
#include "ucx/ucx.h"
#include "ucx/ucx_ep_state.h"

#include "base/handle.h"
#include "common/random.h"
#include "common/clock.h"
#include "common/config_vars.h"
#include "common/socket.h"
#include "common/wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

namespace zcx::ucx {
namespace {

constexpr size_t kHandleAddrBytes = 16;

zcx_peer_info_t self_info(const Ctx* ctx) {
  zcx_peer_info_t who{};
  who.rank = ctx->self.rank;
  who.pid = static_cast<int>(getpid());
  snprintf(who.host, sizeof(who.host), "%s", ctx->self.host.c_str());
  return who;
}

// Handle payload: family u8, reserved u8, port u16, address 16 bytes, listener id u32, then
// who listens (rank u32, pid u32, host length u8, host bytes): a send comm can name its peer
// before the acceptor has answered.
Status encode_handle(const SockAddr& addr, uint32_t listen_id, const zcx_peer_info_t& who,
                     void* handle) {
  uint8_t payload[kHandlePayloadMax];
  wire::Writer w(payload, sizeof(payload));
  w.u8(addr.family() == AF_INET6 ? 6 : 4);
  w.u8(0);
  w.u16(static_cast<uint16_t>(addr.port()));
  uint8_t raw[kHandleAddrBytes] = {};
  if (addr.family() == AF_INET6)
    memcpy(raw, &reinterpret_cast<const sockaddr_in6*>(addr.sa())->sin6_addr, 16);
  else
    memcpy(raw, &reinterpret_cast<const sockaddr_in*>(addr.sa())->sin_addr, 4);
  w.bytes(raw, sizeof(raw));
  w.u32(listen_id);
  w.u32(static_cast<uint32_t>(who.rank));
  w.u32(static_cast<uint32_t>(who.pid));
  size_t host_len = std::min(strnlen(who.host, sizeof(who.host)), size_t{63});
  w.u8(static_cast<uint8_t>(host_len));
  w.bytes(who.host, host_len);
  return handle_encode(ZCX_PROVIDER_ID_UCX, payload, w.size(), handle);
}

Status decode_handle(const void* handle, SockAddr* addr, uint32_t* listen_id,
                     zcx_peer_info_t* who, std::string* key) {
  uint8_t payload[kHandlePayloadMax];
  size_t len = 0;
  ZCX_TRY(handle_decode(handle, ZCX_PROVIDER_ID_UCX, payload, sizeof(payload), &len));
  wire::Reader r(payload, len);
  uint8_t family = r.u8();
  (void)r.u8();
  uint16_t port = r.u16();
  uint8_t raw[kHandleAddrBytes];
  r.bytes(raw, sizeof(raw));
  *listen_id = r.u32();
  *who = zcx_peer_info_t{};
  who->rank = static_cast<int>(r.u32());
  who->pid = static_cast<int>(r.u32());
  size_t host_len = r.u8();
  if (host_len < sizeof(who->host)) r.bytes(who->host, host_len);
  if (!r.ok() || host_len >= sizeof(who->host) || (family != 4 && family != 6) || port == 0)
    return set_error(Status::kInvalidArg, kLog, "ucx connect: malformed handle");
  *addr = SockAddr{};
  if (family == 6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(addr->sa());
    sin6->sin6_family = AF_INET6;
    memcpy(&sin6->sin6_addr, raw, 16);
    addr->len = sizeof(sockaddr_in6);
  } else {
    auto* sin = reinterpret_cast<sockaddr_in*>(addr->sa());
    sin->sin_family = AF_INET;
    memcpy(&sin->sin_addr, raw, 4);
    addr->len = sizeof(sockaddr_in);
  }
  addr->set_port(port);
  key->assign(reinterpret_cast<const char*>(payload), len);
  return Status::kSuccess;
}

}  // namespace

// ---- listen -------------------------------------------------------------------------------

Status listen(Ctx* ctx, void* handle, ListenComm** out) {
  SockAddr local;
  std::string ifname;
  ZCX_TRY(socket_local_address(&local, &ifname));
  auto lc = std::make_unique<ListenComm>();
  lc->ctx = ctx;
  lc->listen_id = static_cast<uint32_t>(random_u64());
  Status s = socket_listen(local, 128, &lc->sock, &lc->addr);
  if (!ok(s))
    return set_error(s, kLog, "ucx listen on %s (%s): %s", local.to_string().c_str(),
                     ifname.c_str(), last_error());
  ZCX_TRY(encode_handle(lc->addr, lc->listen_id, self_info(ctx), handle));
  {
    std::lock_guard<std::recursive_mutex> lock(ctx->mu);
    ucp_listener_start(ctx, local);
  }
  ZCX_INFO(kLog, "ucx: listening on %s (%s), listener id %u", lc->addr.to_string().c_str(),
           ifname.c_str(), lc->listen_id);
  *out = lc.release();
  return Status::kSuccess;
}

Status close_listen(ListenComm* lc) {
  delete lc;  // closes the listening socket and any half-made connection
  return Status::kSuccess;
}

// ---- connect ------------------------------------------------------------------------------

Status connect(Ctx* ctx, const void* handle, SendComm** out) {
  *out = nullptr;
  SockAddr addr;
  uint32_t listen_id = 0;
  zcx_peer_info_t listener{};
  std::string key;
  ZCX_TRY(decode_handle(handle, &addr, &listen_id, &listener, &key));
  std::lock_guard<std::recursive_mutex> lock(ctx->mu);
  auto it = ctx->connects.find(key);
  if (it == ctx->connects.end()) {
    PendingConnect* pc = nullptr;
    ZCX_TRY(connect_start(ctx, addr, listen_id, random_u64(), &pc));
    pc->listener = listener;
    it = ctx->connects.emplace(key, pc).first;
  }
  Status s = connect_finish(it->second, self_info(ctx), out);
  if (!ok(s)) connect_destroy(it->second);  // on success the comm owns it
  if (!ok(s) || *out != nullptr) ctx->connects.erase(it);
  return s;
}

void drop_pending_connects(Ctx* ctx) {
  for (auto& entry : ctx->connects) connect_destroy(entry.second);
  ctx->connects.clear();
}

// ---- accept -------------------------------------------------------------------------------

namespace {

Status take_new_sockets(ListenComm* lc) {
  for (;;) {
    auto a = std::make_unique<Accepting>();
    Status s = socket_accept(lc->sock.get(), &a->sock, &a->peer);
    if (s == Status::kInProgress) return Status::kSuccess;
    if (!ok(s)) return set_error(s, kLog, "ucx accept on %s: %s", lc->addr.to_string().c_str(),
                                 last_error());
    a->start_ns = now_ns();
    lc->pending.push_back(std::move(a));
  }
}

}  // namespace

// Half-made connections are independent sockets, so several can be in progress at once.
Status accept(ListenComm* lc, RecvComm** out) {
  *out = nullptr;
  Ctx* ctx = lc->ctx;
  std::lock_guard<std::recursive_mutex> lock(ctx->mu);
  progress(ctx);  // the ucp_listener's connection requests, should the caller only accept
  ZCX_TRY(take_new_sockets(lc));
  for (size_t i = 0; i < lc->pending.size(); ++i) {
    Status s = accept_finish(lc, lc->pending[i].get(), self_info(ctx), out);
    if (ok(s) && *out == nullptr) continue;
    lc->pending.erase(lc->pending.begin() + static_cast<std::ptrdiff_t>(i));
    return s;
  }
  return Status::kSuccess;
}

// ---- close --------------------------------------------------------------------------------

void close_comm(CommBase* comm) {
  Ctx* ctx = comm->ctx;
  std::lock_guard<std::recursive_mutex> lock(ctx->mu);
  // Tell the peer how many messages this side posted, so it can tell "closed after the
  // last message" from "died" (best effort: a full or broken socket just drops it).
  std::string record = close_record(comm->seq);
  if (comm->sock.valid())
    (void)!send(comm->sock.get(), record.data(), record.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  drop_requests(comm);
  if (comm->handshake != nullptr) connect_destroy(comm->handshake);
  ep_close(ctx, comm->small_ep, std::move(comm->small_ep_error));
  ep_close(ctx, comm->ep, std::move(comm->ep_error));
  delete comm;
}

}  // namespace zcx::ucx
