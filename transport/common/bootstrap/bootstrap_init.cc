// Bootstrap set-up: the root serving joins (non-blocking, poll-based, per-connection
// deadlines) and the other ranks joining it. See bootstrap_internal.h for the design.
#include "common/bootstrap/bootstrap_internal.h"
#include "common/check.h"
#include "common/config_vars.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace zcx {
namespace {

constexpr size_t kMaxPendingJoins = 128;
constexpr int64_t kHelloDeadlineMs = 10000;  // a real rank sends its hello at once

int64_t hello_deadline_ms() { return std::min<int64_t>(params::timeout_ms(), kHelloDeadlineMs); }

bool is_wildcard(const SockAddr& a) {
  if (a.family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (a.family() == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
  return false;
}

// Best effort, never blocks: for replies on fresh sockets (they fit the send buffer).
bool send_now(int fd, const void* buf, size_t len) {
  return ::send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(len);
}

Status wait_connected(int fd, const SockAddr& addr, const Deadline& dl) {
  for (;;) {
    Status s = socket_connect_done(fd, addr);
    if (s != Status::kInProgress) return s;
    if (dl.expired()) return set_error_quiet(Status::kTimeout, "connect to %s timed out",
                                             addr.to_string().c_str());
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, std::min(dl.remaining_ms(), 100));
  }
}

}  // namespace

bool WarnLimiter::allow() {
  constexpr int kBurst = 10;
  constexpr int64_t kWindowMs = 10000;
  int64_t now = now_ms();
  if (now - window_start_ms_ > kWindowMs) {
    if (suppressed_ > 0)
      ZCX_WARN(kLogBootstrap, "%d more rejected bootstrap connections were not logged",
               suppressed_);
    window_start_ms_ = now;
    in_window_ = 0;
    suppressed_ = 0;
  }
  if (in_window_ < kBurst) {
    ++in_window_;
    return true;
  }
  ++suppressed_;
  return false;
}

struct SocketBootstrap::Pending {
  UniqueFd fd;
  SockAddr from;
  uint8_t buf[bootwire::kHelloBytes];
  size_t got = 0;
  Deadline deadline = Deadline::after_ms(hello_deadline_ms());
};

SocketBootstrap::SocketBootstrap(const UniqueId& id, int rank, int nranks)
    : rank_(rank), nranks_(nranks), secret_(id.secret), root_addr_(id.root),
      my_host_(local_host_name().substr(0, bootwire::kHostBytes - 1)) {
  peers_.resize(static_cast<size_t>(nranks));
  out_conns_.resize(static_cast<size_t>(nranks));
  in_conns_.resize(static_cast<size_t>(nranks));
  out_reply_seen_.resize(static_cast<size_t>(nranks));
}

SocketBootstrap::~SocketBootstrap() = default;

const std::string& SocketBootstrap::host(int rank) const {
  static const std::string unknown = "unknown host";
  if (rank < 0 || rank >= nranks_) return unknown;
  return peers_[static_cast<size_t>(rank)].host.empty() ? unknown
                                                         : peers_[static_cast<size_t>(rank)].host;
}

int SocketBootstrap::pid(int rank) const {
  if (rank < 0 || rank >= nranks_) return -1;
  return static_cast<int>(peers_[static_cast<size_t>(rank)].pid);
}

std::string SocketBootstrap::who(int rank) const {
  return "rank " + std::to_string(rank) + " (" + host(rank) + ")";
}

bootwire::Hello SocketBootstrap::make_hello(bootwire::ConnKind kind) const {
  bootwire::Hello h;
  h.kind = kind;
  h.lib_version = static_cast<uint32_t>(zcx_version());
  h.nranks = static_cast<uint32_t>(nranks_);
  h.secret = secret_;
  h.rank = static_cast<uint32_t>(rank_);
  h.pid = static_cast<uint32_t>(getpid());
  h.listen = peer_listen_addr_;
  h.host = my_host_;
  return h;
}

void SocketBootstrap::log_reject(const SockAddr& from, const std::string& why) {
  if (reject_warns_.allow())
    ZCX_WARN(kLogBootstrap, "rank %d rejected a bootstrap connection from %s: %s", rank_,
             from.to_string().c_str(), why.c_str());
}

Status SocketBootstrap::start(UniqueFd reserved_root_listener) {
  if (rank_ == 0) {
    ZCX_TRY(open_root_listener(std::move(reserved_root_listener)));
    peers_[0] = bootwire::PeerRecord{static_cast<uint32_t>(getpid()), peer_listen_addr_, my_host_};
    if (nranks_ > 1) ZCX_TRY(root_serve_joins());
    ZCX_TRY(root_send_table());
    root_listen_.reset();  // every rank has joined: nothing else may connect to the root
  } else {
    ZCX_TRY(client_join());
  }
  for (const UniqueFd* fd : {&root_listen_, &root_conn_, &peer_listen_})
    if (fd->valid()) track_fd(fd->get());
  for (const UniqueFd& fd : root_conns_)
    if (fd.valid()) track_fd(fd.get());
  ZCX_INFO(kLogBootstrap, "bootstrap up: rank %d of %d, root %s", rank_, nranks_,
           root_addr_.to_string().c_str());
  return Status::kSuccess;
}

Status SocketBootstrap::open_root_listener(UniqueFd reserved) {
  if (reserved.valid()) {
    root_listen_ = std::move(reserved);
  } else {
    SockAddr bound;
    Status s = socket_listen(root_addr_, 1024, &root_listen_, &bound);
    if (failed(s)) {
      // MASTER_ADDR may name this host by an address we cannot bind: listen on all.
      SockAddr any;
      any.storage.ss_family = static_cast<sa_family_t>(root_addr_.family());
      any.len = root_addr_.len;
      any.set_port(root_addr_.port());
      s = socket_listen(any, 1024, &root_listen_, &bound);
      if (failed(s))
        return set_error(s, kLogBootstrap,
                         "rank 0 cannot listen at the bootstrap root %s: %s (is ZCX_ROOT an "
                         "address of rank 0's host, and is the port free?)",
                         root_addr_.to_string().c_str(), last_error());
    }
  }
  SockAddr local = root_addr_;
  if (is_wildcard(local)) ZCX_TRY(socket_local_address(&local, nullptr));
  return open_peer_listener(local);
}

Status SocketBootstrap::open_peer_listener(const SockAddr& local_ip) {
  SockAddr addr = local_ip;
  addr.set_port(0);
  Status s = socket_listen(addr, 1024, &peer_listen_, &peer_listen_addr_);
  if (failed(s))
    return set_error(s, kLogBootstrap, "rank %d cannot open its bootstrap peer listener on %s",
                     rank_, addr.to_string().c_str());
  return Status::kSuccess;
}

Status SocketBootstrap::root_serve_joins() {
  root_conns_.resize(static_cast<size_t>(nranks_));
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  std::vector<Pending> pending;
  int joined = 1;
  while (joined < nranks_) {
    if (dl.expired()) {
      std::string missing;
      int count = 0;
      for (int r = 1; r < nranks_; ++r)
        if (!root_conns_[static_cast<size_t>(r)].valid() && count++ < 16)
          missing += (missing.empty() ? "" : ",") + std::to_string(r);
      return root_fail(Status::kTimeout,
                       "bootstrap root (rank 0, " + my_host_ + ", " + root_addr_.to_string() +
                           "): " + (count > 1 ? "ranks " : "rank ") + missing +
                           " did not join within ZCX_TIMEOUT (" +
                           std::to_string(params::timeout_ms()) +
                           " ms): did they start? same ZCX_ROOT and secret? can they reach it?");
    }
    ZCX_TRY(root_poll_round(pending, joined, dl));
  }
  return Status::kSuccess;
}

Status SocketBootstrap::root_poll_round(std::vector<Pending>& pending, int& joined,
                                        const Deadline& dl) {
  std::vector<pollfd> fds{{root_listen_.get(), POLLIN, 0}};
  for (Pending& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
  for (int r = 1; r < nranks_; ++r)
    if (root_conns_[static_cast<size_t>(r)].valid())
      fds.push_back({root_conns_[static_cast<size_t>(r)].get(), POLLIN, 0});
  int rc = poll(fds.data(), fds.size(), std::min(dl.remaining_ms(), 100));
  if (rc < 0 && errno != EINTR)
    return set_error(Status::kSystem, kLogBootstrap, "poll: %s", errno_text(errno));
  size_t npending = pending.size();
  for (size_t i = 0; i < npending; ++i)
    if (fds[1 + i].revents) root_read_hello(pending[i], joined);
  if (fds[0].revents & POLLIN) {
    for (;;) {
      Pending p;
      Status s = socket_accept(root_listen_.get(), &p.fd, &p.from);
      if (s != Status::kSuccess) break;
      if (pending.size() >= kMaxPendingJoins) {
        log_reject(p.from, "too many connections in their handshake");
        continue;
      }
      pending.push_back(std::move(p));
    }
  }
  for (Pending& p : pending)
    if (p.fd.valid() && p.deadline.expired()) {
      log_reject(p.from, "no complete hello within " + std::to_string(hello_deadline_ms()) +
                             " ms (got " + std::to_string(p.got) + " bytes)");
      p.fd.reset();
    }
  std::erase_if(pending, [](const Pending& p) { return !p.fd.valid(); });
  return root_check_joined_alive();
}

// A joined rank sends nothing until the table arrives: readable means it closed or died.
Status SocketBootstrap::root_check_joined_alive() {
  for (int r = 1; r < nranks_; ++r) {
    UniqueFd& fd = root_conns_[static_cast<size_t>(r)];
    if (!fd.valid()) continue;
    pollfd p{fd.get(), POLLIN, 0};
    if (poll(&p, 1, 0) > 0)
      return root_fail(Status::kRemote, who(r) + " closed its bootstrap connection during "
                                                 "init (did it exit or crash?)");
  }
  return Status::kSuccess;
}

void SocketBootstrap::root_read_hello(Pending& p, int& joined) {
  ssize_t n = ::recv(p.fd.get(), p.buf + p.got, sizeof p.buf - p.got, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    log_reject(p.from, "closed before completing its hello (" + std::to_string(p.got) + " bytes)");
    p.fd.reset();
    return;
  }
  p.got += static_cast<size_t>(n);
  if (p.got < sizeof p.buf) return;
  bootwire::Hello h;
  std::string why;
  Status s = bootwire::decode_hello(p.buf, &h, &why);
  if (ok(s)) s = bootwire::check_hello(h, bootwire::ConnKind::kRoot, secret_, nranks_, &why);
  if (ok(s) && (h.rank == 0 || root_conns_[h.rank].valid())) {
    why = "duplicate rank " + std::to_string(h.rank) + " (already joined from " +
          host(static_cast<int>(h.rank)) + ")";
    s = Status::kMismatch;
  }
  uint8_t reply[bootwire::kReplyBytes];
  bootwire::encode_reply(s, why, reply);
  if (ok(s) && !send_now(p.fd.get(), reply, sizeof reply)) {
    why = "could not send the reply";
    s = Status::kRemote;
  }
  if (failed(s)) {
    send_now(p.fd.get(), reply, sizeof reply);
    log_reject(p.from, why);
    p.fd.reset();
    return;
  }
  peers_[h.rank] = bootwire::PeerRecord{h.pid, h.listen, h.host};
  root_conns_[h.rank] = std::move(p.fd);
  ++joined;
  ZCX_TRACE(kLogBootstrap, "root: rank %u joined from %s (pid %u)", h.rank, h.host.c_str(), h.pid);
}

Status SocketBootstrap::root_send_table() {
  std::vector<uint8_t> table(static_cast<size_t>(nranks_) * bootwire::kPeerRecordBytes);
  for (int r = 0; r < nranks_; ++r)
    bootwire::encode_peer_record(peers_[static_cast<size_t>(r)],
                                 table.data() + static_cast<size_t>(r) * bootwire::kPeerRecordBytes);
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  for (int r = 1; r < nranks_; ++r) {
    Status s = write_frame(root_conns_[static_cast<size_t>(r)].get(), bootwire::FrameType::kTable,
                           0, table.data(), table.size(), dl, who(r));
    if (failed(s)) return root_fail(s, std::string("bootstrap root: ") + last_error());
  }
  return Status::kSuccess;
}

Status SocketBootstrap::client_connect_root(UniqueFd* fd, const Deadline& dl) {
  int backoff_ms = 10;
  for (;;) {
    Status s = socket_connect_start(root_addr_, fd);
    if (ok(s)) s = wait_connected(fd->get(), root_addr_, dl);
    if (ok(s)) return s;
    if (dl.expired())
      return set_error(Status::kTimeout, kLogBootstrap,
                       "rank %d cannot reach the bootstrap root (rank 0) at %s within "
                       "ZCX_TIMEOUT: %s (is rank 0 running? is ZCX_ROOT right and reachable "
                       "from %s?)",
                       rank_, root_addr_.to_string().c_str(), last_error(), my_host_.c_str());
    fd->reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, dl.remaining_ms())));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
}

Status SocketBootstrap::client_join() {
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  ZCX_TRY(client_connect_root(&root_conn_, dl));
  SockAddr local;
  local.len = sizeof local.storage;
  ZCX_SYSCHECK(getsockname(root_conn_.get(), local.sa(), &local.len), kLogBootstrap, "getsockname");
  ZCX_TRY(open_peer_listener(local));
  uint8_t buf[bootwire::kHelloBytes];
  bootwire::encode_hello(make_hello(bootwire::ConnKind::kRoot), buf);
  std::string root_name = "bootstrap root (rank 0) at " + root_addr_.to_string();
  Status s = socket_send_all(root_conn_.get(), buf, sizeof buf, dl, root_name.c_str());
  uint8_t reply[bootwire::kReplyBytes];
  if (ok(s)) s = socket_recv_all(root_conn_.get(), reply, sizeof reply, dl, root_name.c_str());
  if (failed(s))
    return set_error(s, kLogBootstrap, "rank %d: handshake with the %s failed: %s", rank_,
                     root_name.c_str(), last_error());
  Status verdict;
  std::string reason;
  if (failed(bootwire::decode_reply(reply, &verdict, &reason)))
    return set_error(Status::kProtocol, kLogBootstrap,
                     "rank %d: malformed reply from the %s (not a zcx root?)", rank_, root_name.c_str());
  if (failed(verdict))
    return set_error(verdict, kLogBootstrap, "rank %d: the %s rejected this rank: %s", rank_,
                     root_name.c_str(), reason.c_str());
  return client_read_table(Deadline::after_ms(params::timeout_ms() + 1000));
}

Status SocketBootstrap::client_read_table(const Deadline& dl) {
  bootwire::FrameHeader h;
  ZCX_TRY(read_frame(root_conn_.get(), &h, dl, "the bootstrap root (rank 0)"));
  size_t want = static_cast<size_t>(nranks_) * bootwire::kPeerRecordBytes;
  if (h.type != bootwire::FrameType::kTable || h.len != want)
    return set_error(Status::kProtocol, kLogBootstrap,
                     "rank %d: unexpected frame (type %u, %llu bytes) instead of the rank table",
                     rank_, static_cast<unsigned>(h.type), static_cast<unsigned long long>(h.len));
  std::vector<uint8_t> table(want);
  Status s = socket_recv_all(root_conn_.get(), table.data(), want, dl, "the bootstrap root (rank 0)");
  if (failed(s)) return set_error(s, kLogBootstrap, "rank %d: %s", rank_, last_error());
  for (int r = 0; r < nranks_; ++r)
    if (!bootwire::decode_peer_record(table.data() + static_cast<size_t>(r) * bootwire::kPeerRecordBytes,
                                      &peers_[static_cast<size_t>(r)]))
      return set_error(Status::kProtocol, kLogBootstrap,
                       "rank %d: malformed entry for rank %d in the rank table", rank_, r);
  return Status::kSuccess;
}

}  // namespace zcx
