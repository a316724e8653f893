// Connection set-up state of the ucx provider, shared by ucx_ep.cc and ucx_handshake_ep.cc.
#pragma once

#include "ucx/ucx.h"

#include "common/socket.h"

namespace zcx::ucx {

// The connection an acceptor is working on: its endpoint and the hello it waits for.
// Connection requests are taken one at a time per listener, so the hello (tagged with the
// listener id) can only come from this endpoint: a connector cannot send before the acceptor
// has created its side of the endpoint.
struct Accepting {
  ucp_ep_h ep = nullptr;
  std::unique_ptr<EpError> ep_error;
  void* hello_req = nullptr;
  uint8_t hello_buf[kHelloBytes] = {};
  int64_t start_ns = 0;
};

struct ListenComm {
  Ctx* ctx = nullptr;
  ucp_listener_h listener = nullptr;
  uint32_t listen_id = 0;
  SockAddr addr;
  std::deque<ucp_conn_request_h> requests;  // filled by UCX's connection callback
  bool accepting = false;
  Accepting cur;
  std::string reject_buf;  // a rejection in flight while its endpoint closes
};

struct PendingConnect {
  Ctx* ctx = nullptr;
  SockAddr addr;
  ucp_ep_h ep = nullptr;
  std::unique_ptr<EpError> ep_error;
  uint64_t nonce = 0;
  std::string hello_buf;
  void* hello_req = nullptr;
  uint8_t ack_buf[kHelloBytes] = {};
  void* ack_req = nullptr;
  int64_t start_ns = 0;
};

inline uint64_t hello_tag(uint32_t listen_id) { return make_tag(TagKind::kHello, listen_id); }
inline uint64_t ack_tag(uint64_t nonce) { return make_tag(TagKind::kAck, nonce); }

Status connect_start(Ctx* ctx, const SockAddr& addr, uint32_t listen_id, uint64_t nonce,
                     const zcx_peer_info_t& self, PendingConnect** out);
// kSuccess with *out == nullptr while the handshake is in flight.
Status connect_finish(PendingConnect* pc, SendComm** out);
void connect_destroy(PendingConnect* pc);

Status accept_start(ListenComm* lc, ucp_conn_request_h request, const zcx_peer_info_t& self);
Status accept_finish(ListenComm* lc, const zcx_peer_info_t& self, RecvComm** out);
void abandon_accept(ListenComm* lc);

}  // namespace zcx::ucx
