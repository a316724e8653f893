// Connection set-up state of the ucx provider (side channel, see ucx.h), shared by
// ucx_ep.cc and ucx_handshake_ep.cc.
#pragma once

#include "ucx/ucx.h"

#include "common/socket.h"

#include <vector>

namespace zcx::ucx {

// Reads one handshake frame without blocking: Hello, u16 address length, worker address.
class FrameReader {
 public:
  // kInProgress until the frame is complete; kRemote/kProtocol on EOF, error or bad length.
  Status read(int fd, const char* peer);
  const std::string& bytes() const { return buf_; }
  std::string address() const { return buf_.substr(kHelloBytes + 2); }

 private:
  size_t want() const;
  std::string buf_;
};

std::string frame_encode(const Hello& h, const std::string& worker_address);

// A socket accepted by the listener, waiting for its hello.
struct Accepting {
  UniqueFd sock;
  SockAddr peer;
  FrameReader rx;
  int64_t start_ns = 0;
};

struct ListenComm {
  Ctx* ctx = nullptr;
  UniqueFd sock;
  SockAddr addr;
  uint32_t listen_id = 0;
  std::vector<std::unique_ptr<Accepting>> pending;
};

struct PendingConnect {
  Ctx* ctx = nullptr;
  SockAddr addr;
  UniqueFd sock;
  bool hello_sent = false;
  FrameReader rx;
  uint32_t listen_id = 0;
  zcx_peer_info_t listener{};  // from the handle, until the ack confirms it
  uint64_t nonce = 0;
  int64_t start_ns = 0;
};

Status connect_start(Ctx* ctx, const SockAddr& addr, uint32_t listen_id, uint64_t nonce,
                     PendingConnect** out);
// kSuccess with *out == nullptr until the hello is sent; *out then owns pc (half-open).
Status connect_finish(PendingConnect* pc, const zcx_peer_info_t& self, SendComm** out);
void connect_destroy(PendingConnect* pc);

// kSuccess with *out == nullptr until the hello on `a` is complete.
Status accept_finish(ListenComm* lc, Accepting* a, const zcx_peer_info_t& self, RecvComm** out);

}  // namespace zcx::ucx
