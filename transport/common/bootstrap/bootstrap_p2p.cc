// Bootstrap send/recv: direct rank-to-rank connections to each rank's peer listener, made on
// first use with an authenticated Hello, carrying Message frames matched by (peer, tag) in
// arrival order. A send does not wait for the receiver: messages are meant to be small
// (they sit in the socket buffer until the peer's recv reads them).
#include "common/bootstrap/bootstrap_internal.h"
#include "common/check.h"
#include "common/config_vars.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace zcx {
namespace {
constexpr size_t kMaxMessageBytes = size_t{64} << 20;
}  // namespace

// A failure caused by abort() (sockets shut down under us) is reported as kAborted.
Status SocketBootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  Status s = send_impl(peer, tag, data, bytes);
  return failed(s) && aborted_.load() ? check_usable() : s;
}

Status SocketBootstrap::recv(int peer, int tag, void* data, size_t bytes) {
  Status s = recv_impl(peer, tag, data, bytes);
  return failed(s) && aborted_.load() ? check_usable() : s;
}

Status SocketBootstrap::send_impl(int peer, int tag, const void* data, size_t bytes) {
  ZCX_CHECK_ARG(peer >= 0 && peer < nranks_, kLogBootstrap, "send: peer %d out of range [0,%d)",
                peer, nranks_);
  ZCX_CHECK_ARG(tag >= 0, kLogBootstrap, "send: negative tag %d", tag);
  ZCX_CHECK_ARG(data != nullptr || bytes == 0, kLogBootstrap, "send: buffer is NULL");
  ZCX_CHECK_ARG(bytes <= kMaxMessageBytes, kLogBootstrap,
                "send: %zu bytes exceeds the bootstrap message limit (64 MiB)", bytes);
  std::lock_guard<std::mutex> lock(op_mu_);
  ZCX_TRY(check_usable());
  if (peer == rank_) {
    const auto* p = static_cast<const uint8_t*>(data);
    inbox_.push_back(Message{peer, static_cast<uint32_t>(tag), std::vector<uint8_t>(p, p + bytes)});
    return Status::kSuccess;
  }
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  UniqueFd& fd = out_conns_[static_cast<size_t>(peer)];
  if (!fd.valid()) ZCX_TRY(peer_connect(peer, dl));
  Status s = check_peer_reply(peer);
  if (ok(s)) s = write_frame(fd.get(), bootwire::FrameType::kMessage, static_cast<uint32_t>(tag),
                         data, bytes, dl, who(peer));
  if (failed(s)) {
    untrack_fd(fd.get());
    fd.reset();
    return set_error(s, kLogBootstrap, "rank %d: bootstrap send to %s failed: %s", rank_,
                     who(peer).c_str(), last_error());
  }
  return Status::kSuccess;
}

Status SocketBootstrap::peer_connect(int peer, const Deadline& dl) {
  const SockAddr& addr = peers_[static_cast<size_t>(peer)].listen;
  // The peer listens from its init on, so a refusal means it is gone: no retry.
  UniqueFd fd;
  Status s = socket_connect_start(addr, &fd);
  if (ok(s)) s = socket_connect_done(fd.get(), addr);
  while (s == Status::kInProgress && !dl.expired()) {
    pollfd p{fd.get(), POLLOUT, 0};
    poll(&p, 1, std::min(dl.remaining_ms(), 100));
    s = socket_connect_done(fd.get(), addr);
  }
  if (s == Status::kInProgress) s = set_error_quiet(Status::kTimeout, "connect timed out");
  uint8_t hello[bootwire::kHelloBytes];
  bootwire::encode_hello(make_hello(bootwire::ConnKind::kPeer), hello);
  std::string name = who(peer);
  if (ok(s)) s = socket_send_all(fd.get(), hello, sizeof hello, dl, name.c_str());
  if (failed(s))
    return set_error(s, kLogBootstrap, "rank %d: cannot open a bootstrap connection to %s at %s: %s", rank_,
                     name.c_str(), addr.to_string().c_str(), last_error());
  // The reply comes when the peer next calls recv; send must not wait for it (two ranks
  // sending to each other first would deadlock). check_peer_reply reads it later.
  out_reply_seen_[static_cast<size_t>(peer)] = false;
  track_fd(fd.get());
  out_conns_[static_cast<size_t>(peer)] = std::move(fd);
  return Status::kSuccess;
}

// Non-blocking: reads the peer's handshake reply if it has arrived; a rejection or a closed
// connection is an error naming the peer.
Status SocketBootstrap::check_peer_reply(int peer) {
  if (out_reply_seen_[static_cast<size_t>(peer)]) return Status::kSuccess;
  int fd = out_conns_[static_cast<size_t>(peer)].get();
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return Status::kSuccess;
  uint8_t reply[bootwire::kReplyBytes];
  std::string name = who(peer), reason;
  Status s = socket_recv_all(fd, reply, sizeof reply, Deadline::after_ms(1000), name.c_str());
  if (failed(s)) return s;
  Status verdict;
  if (failed(bootwire::decode_reply(reply, &verdict, &reason)))
    return set_error_quiet(Status::kProtocol, "malformed handshake reply from %s", name.c_str());
  if (failed(verdict))
    return set_error_quiet(verdict, "%s rejected the connection: %s", name.c_str(), reason.c_str());
  out_reply_seen_[static_cast<size_t>(peer)] = true;
  return Status::kSuccess;
}

Status SocketBootstrap::recv_impl(int peer, int tag, void* data, size_t bytes) {
  ZCX_CHECK_ARG(peer >= 0 && peer < nranks_, kLogBootstrap, "recv: peer %d out of range [0,%d)",
                peer, nranks_);
  ZCX_CHECK_ARG(tag >= 0, kLogBootstrap, "recv: negative tag %d", tag);
  ZCX_CHECK_ARG(data != nullptr || bytes == 0, kLogBootstrap, "recv: buffer is NULL");
  std::lock_guard<std::mutex> lock(op_mu_);
  ZCX_TRY(check_usable());
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  for (;;) {
    Status s;
    if (take_message(peer, static_cast<uint32_t>(tag), data, bytes, &s)) return s;
    ZCX_TRY(check_usable());
    if (dl.expired())
      return set_error(Status::kTimeout, kLogBootstrap,
                       "rank %d: no bootstrap message with tag %d from %s within ZCX_TIMEOUT "
                       "(did it send it? is it stuck?)", rank_, tag, who(peer).c_str());
    std::vector<pollfd> fds{{peer_listen_.get(), POLLIN, 0}};
    std::vector<int> ranks{-1};
    for (int r = 0; r < nranks_; ++r)
      if (in_conns_[static_cast<size_t>(r)].valid()) {
        fds.push_back({in_conns_[static_cast<size_t>(r)].get(), POLLIN, 0});
        ranks.push_back(r);
      }
    int rc = poll(fds.data(), fds.size(), std::min(dl.remaining_ms(), 100));
    if (rc < 0 && errno != EINTR)
      return set_error(Status::kSystem, kLogBootstrap, "poll: %s", errno_text(errno));
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      s = peer_read_message(ranks[i], dl);
      if (failed(s) && ranks[i] == peer) return s;
    }
    if (fds[0].revents) ZCX_TRY(peer_accept_one(dl));
  }
}

bool SocketBootstrap::take_message(int peer, uint32_t tag, void* data, size_t bytes, Status* s) {
  auto it = std::find_if(inbox_.begin(), inbox_.end(),
                         [&](const Message& m) { return m.peer == peer && m.tag == tag; });
  if (it == inbox_.end()) return false;
  if (it->data.size() != bytes) {
    *s = set_error(Status::kInvalidUsage, kLogBootstrap,
                   "rank %d: bootstrap message with tag %u from %s has %zu bytes, recv expected %zu",
                   rank_, tag, who(peer).c_str(), it->data.size(), bytes);
  } else {
    if (bytes) memcpy(data, it->data.data(), bytes);
    *s = Status::kSuccess;
  }
  inbox_.erase(it);
  return true;
}

// One whole frame from `peer` (senders write frames at once). A closed or broken
// connection is dropped; the error names the peer.
Status SocketBootstrap::peer_read_message(int peer, const Deadline& dl) {
  UniqueFd& fd = in_conns_[static_cast<size_t>(peer)];
  std::string name = who(peer);
  bootwire::FrameHeader h;
  uint8_t hdr[bootwire::kFrameHeaderBytes];
  Status s = socket_recv_all(fd.get(), hdr, sizeof hdr, dl, name.c_str());
  if (ok(s) && (failed(bootwire::decode_frame_header(hdr, &h)) ||
                h.type != bootwire::FrameType::kMessage || h.len > kMaxMessageBytes))
    s = set_error_quiet(Status::kProtocol, "malformed bootstrap message frame from %s", name.c_str());
  Message m{peer, h.tag, {}};
  if (ok(s)) {
    m.data.resize(h.len);
    s = socket_recv_all(fd.get(), m.data.data(), m.data.size(), dl, name.c_str());
  }
  if (failed(s)) {
    untrack_fd(fd.get());
    fd.reset();
    return set_error(s, kLogBootstrap, "rank %d: bootstrap connection from %s failed: %s (did it "
                     "exit or crash?)", rank_, name.c_str(), last_error());
  }
  inbox_.push_back(std::move(m));
  return Status::kSuccess;
}

// Accepts one peer connection and checks its Hello. Bad connections are dropped with a
// logged reason; only a failure of our own listener is an error.
Status SocketBootstrap::peer_accept_one(const Deadline& dl) {
  UniqueFd fd;
  SockAddr from;
  Status s = socket_accept(peer_listen_.get(), &fd, &from);
  if (s == Status::kInProgress) return Status::kSuccess;
  ZCX_TRY(s);
  Deadline hello_dl = Deadline::after_ms(std::min<int64_t>(dl.remaining_ms(), 10000));
  uint8_t hello[bootwire::kHelloBytes];
  std::string why;
  bootwire::Hello h;
  s = socket_recv_all(fd.get(), hello, sizeof hello, hello_dl, from.to_string().c_str());
  if (failed(s)) why = "no complete hello";
  if (ok(s)) s = bootwire::decode_hello(hello, &h, &why);
  if (ok(s)) s = bootwire::check_hello(h, bootwire::ConnKind::kPeer, secret_, nranks_, &why);
  if (ok(s) && in_conns_[h.rank].valid()) {
    s = Status::kMismatch;
    why = "a second connection claiming rank " + std::to_string(h.rank);
  }
  uint8_t reply[bootwire::kReplyBytes];
  bootwire::encode_reply(s, why, reply);
  Status sent = socket_send_all(fd.get(), reply, sizeof reply, hello_dl, from.to_string().c_str());
  if (failed(s) || failed(sent)) {
    log_reject(from, failed(s) ? why : std::string("could not send the reply"));
    return Status::kSuccess;
  }
  track_fd(fd.get());
  in_conns_[h.rank] = std::move(fd);
  return Status::kSuccess;
}

}  // namespace zcx
