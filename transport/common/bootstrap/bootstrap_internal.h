// The socket bootstrap (a star around rank 0 plus direct peer links). Not a public header:
// bootstrap.h is the interface.
//
// Design (docs/WIRE.md, "Bootstrap"):
//  - Rank 0 listens at the unique id's address (the root). Every other rank connects to it,
//    sends a Hello (magic, wire version, library version, secret, rank, nranks, pid, host,
//    the address of its own peer listener) and gets a Reply. The root serves all joins with
//    non-blocking poll()-based accept/read and a per-connection deadline, so a slow or
//    garbage client never blocks it; bad connections are rejected with a rate-limited WARN.
//  - When all ranks have joined, the root sends each the table (pid, host, peer listen
//    address of every rank). The root connections stay open: allgather and barrier are a
//    gather to the root and a broadcast back over them (a star: 2(N-1) messages, fine for
//    bootstrap sizes).
//  - send/recv go over direct rank-to-rank connections to the peer listeners, made on first
//    use with the same Hello (kind kPeer), and matched by (peer, tag) in arrival order.
//  - When the root sees a rank fail, it sends an Error frame to the others so that every
//    rank's error names the failed rank.
#pragma once

#include "common/bootstrap/bootstrap.h"
#include "common/bootstrap/bootstrap_wire.h"
#include "common/clock.h"
#include "common/fd.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace zcx {

// unique_id.cc / launch_env.cc helpers (exposed for tests).
UniqueFd take_reserved_listener(const UniqueId& id);
uint64_t derive_secret(const std::string& text);

// At most `burst` warnings per `window_ms`; then one line counting the suppressed ones.
class WarnLimiter {
 public:
  bool allow();
  int suppressed() const { return suppressed_; }

 private:
  int64_t window_start_ms_ = 0;
  int in_window_ = 0;
  int suppressed_ = 0;
};

class SocketBootstrap final : public Bootstrap {
 public:
  SocketBootstrap(const UniqueId& id, int rank, int nranks);
  ~SocketBootstrap() override;

  Status start(UniqueFd reserved_root_listener);

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  uint64_t secret() const override { return secret_; }
  const std::string& host(int rank) const override;
  int pid(int rank) const override;
  Status allgather(void* data, size_t bytes) override;
  Status barrier() override;
  Status send(int peer, int tag, const void* data, size_t bytes) override;
  Status recv(int peer, int tag, void* data, size_t bytes) override;
  void abort() override;
  // Where `rank` accepts bootstrap peer connections (tests).
  const SockAddr& peer_address(int rank) const { return peers_[static_cast<size_t>(rank)].listen; }

 private:
  struct Pending;   // a root-side connection still in its handshake
  struct Message {
    int peer;
    uint32_t tag;
    std::vector<uint8_t> data;
  };

  // bootstrap_init.cc
  Status open_root_listener(UniqueFd reserved);
  Status open_peer_listener(const SockAddr& local_ip);
  Status root_serve_joins();
  Status root_poll_round(std::vector<Pending>& pending, int& joined, const Deadline& dl);
  void root_read_hello(Pending& p, int& joined);
  Status root_check_joined_alive();
  Status root_send_table();
  Status client_join();
  Status client_connect_root(UniqueFd* fd, const Deadline& dl);
  Status client_read_table(const Deadline& dl);
  bootwire::Hello make_hello(bootwire::ConnKind kind) const;
  void log_reject(const SockAddr& from, const std::string& why);

  // bootstrap_coll.cc
  Status root_allgather(uint8_t* data, size_t bytes, uint32_t seq);
  Status root_gather_one(int r, uint8_t* data, size_t bytes, uint32_t seq, const Deadline& dl);
  Status client_allgather(uint8_t* data, size_t bytes, uint32_t seq);
  Status read_frame(int fd, bootwire::FrameHeader* h, const Deadline& dl, const std::string& who);
  Status write_frame(int fd, bootwire::FrameType type, uint32_t tag, const void* data,
                     size_t len, const Deadline& dl, const std::string& who);
  Status root_fail(Status s, const std::string& message);
  Status error_from_root(Status s);  // tells the others, then returns s
  Status check_usable() const;

  // bootstrap_p2p.cc
  Status send_impl(int peer, int tag, const void* data, size_t bytes);
  Status recv_impl(int peer, int tag, void* data, size_t bytes);
  Status peer_connect(int peer, const Deadline& dl);
  Status check_peer_reply(int peer);
  Status peer_accept_one(const Deadline& dl);
  Status peer_read_message(int peer, const Deadline& dl);
  bool take_message(int peer, uint32_t tag, void* data, size_t bytes, Status* s);

  std::string who(int rank) const;  // "rank 3 (hostB)"
  void track_fd(int fd);
  void untrack_fd(int fd);

  const int rank_;
  const int nranks_;
  const uint64_t secret_;
  const SockAddr root_addr_;
  std::string my_host_;

  UniqueFd root_listen_;                 // rank 0 only
  std::vector<UniqueFd> root_conns_;     // rank 0: one per rank (slot 0 unused)
  UniqueFd root_conn_;                   // other ranks: to the root
  UniqueFd peer_listen_;
  SockAddr peer_listen_addr_;
  std::vector<bootwire::PeerRecord> peers_;
  std::vector<UniqueFd> out_conns_;      // send(): to each peer's listener
  std::vector<bool> out_reply_seen_;     // the peer's handshake reply was read and good
  std::vector<UniqueFd> in_conns_;       // recv(): accepted from each peer
  std::deque<Message> inbox_;
  uint32_t seq_ = 0;
  WarnLimiter reject_warns_;

  std::mutex op_mu_;                     // one bootstrap operation at a time
  std::mutex fd_mu_;                     // guards live_fds_ (abort shuts them down)
  std::vector<int> live_fds_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> failed_{false};      // a collective failed: the star is out of step
};

}  // namespace zcx
