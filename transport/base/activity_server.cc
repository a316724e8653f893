// The activity query: a thread that answers what this rank's departure page says, and the
// asking side (see activity_server.h; the formats are in docs/WIRE.md, "Activity query").
#include "base/activity_server.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/wire.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace zcx {
namespace {

constexpr uint32_t kQueryMagic = 0x5158435a;   // "ZCXQ"
constexpr uint32_t kAnswerMagic = 0x4158435a;  // "ZCXA"
constexpr uint16_t kVersion = 1;
constexpr size_t kQueryBytes = 32;
constexpr size_t kAnswerBytes = 48;
constexpr uint16_t kFailed = 1, kPolled = 2;  // answer flags
constexpr int kAnswerMs = 250;   // a client that does not send its query by then is dropped
constexpr int kWarnRejects = 3;  // refused queries warned about; the rest at INFO

void encode_query(uint64_t secret, int from, int to, uint8_t out[kQueryBytes]) {
  wire::Writer w(out, kQueryBytes);
  w.u32(kQueryMagic);
  w.u16(kVersion);
  w.u16(0);
  w.u64(secret);
  w.u32(static_cast<uint32_t>(from));
  w.u32(static_cast<uint32_t>(to));
  w.u64(0);
}

// The answer: the page's fields, the time since its last poll rather than the moment (the
// two hosts' clocks differ).
void encode_answer(int rank, const Departures::Activity& a, uint8_t out[kAnswerBytes]) {
  const int64_t age = a.polled_ns != 0 ? now_ns() - a.polled_ns : 0;
  wire::Writer w(out, kAnswerBytes);
  w.u32(kAnswerMagic);
  w.u16(kVersion);
  w.u16(static_cast<uint16_t>((a.failed ? kFailed : 0) | (a.polled_ns != 0 ? kPolled : 0)));
  w.u32(static_cast<uint32_t>(rank));
  w.u32(0);
  w.u64(a.comm);
  w.u64(a.seq);
  w.u64(a.done);
  w.u64(static_cast<uint64_t>(age < 0 ? 0 : age));
}

// False when the bytes are not an answer from `rank`; polled_ns is put on this host's clock
// (`now`: when it came).
bool decode_answer(const uint8_t in[kAnswerBytes], int rank, int64_t now,
                   Departures::Activity* a) {
  wire::Reader r(in, kAnswerBytes);
  const bool head = r.u32() == kAnswerMagic && r.u16() == kVersion;
  const uint16_t flags = r.u16();
  const bool from_rank = r.u32() == static_cast<uint32_t>(rank);
  (void)r.u32();
  a->comm = r.u64();
  a->seq = r.u64();
  a->done = r.u64();
  const uint64_t age = r.u64();
  a->failed = (flags & kFailed) != 0;
  // An age beyond a day is garbage: it would overflow the subtraction below.
  a->polled_ns = (flags & kPolled) ? now - static_cast<int64_t>(age) : 0;
  return r.ok() && head && from_rank && age < 86400ull * 1000000000ull;
}

}  // namespace

Status ActivityServer::listen(SockAddr* bound) {
  SockAddr local;
  std::string ifname;
  ZCX_TRY(socket_local_address(&local, &ifname));
  ZCX_TRY(socket_listen(local, 64, &listen_, bound));
  return Status::kSuccess;
}

Status ActivityServer::start(const Departures* own, uint64_t secret, int rank) {
  if (!listen_.valid() || thread_.joinable()) return Status::kSuccess;
  wake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_.valid())
    return set_error(Status::kSystem, kLogInit, "activity server: eventfd: %s", errno_text(errno));
  own_ = own;
  secret_ = secret;
  rank_ = rank;
  owner_pid_ = getpid();
  try {
    thread_ = std::thread([this] { serve(); });
  } catch (const std::system_error& e) {
    return set_error(Status::kSystem, kLogInit, "activity server: no thread: %s", e.what());
  }
  return Status::kSuccess;
}

void ActivityServer::stop() {
  // A forked child has the object but not the thread (fork copies only the caller's).
  if (thread_.joinable() && getpid() != owner_pid_) thread_.detach();
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(wake_.get(), &one, sizeof one) != sizeof one)
      ZCX_WARN(kLogInit, "activity server: cannot wake its thread: %s", errno_text(errno));
    thread_.join();
  }
  listen_.reset();
  wake_.reset();
}

// Until stop(): answers each connection in turn (each bounded by kAnswerMs).
void ActivityServer::serve() {
  sigset_t all;  // the application's signals go to its own threads
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pollfd fds[2] = {{listen_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      ZCX_WARN(kLogInit, "activity server: poll: %s; no longer answering", errno_text(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    // Out of fds, the pending connection would wake the poll at once, again and again: wait
    // a while (for stop() only) before trying again.
    if (fds[0].revents != 0 && !answer_pending()) (void)poll(&fds[1], 1, 100);
  }
}

// Answers every queued connection; false when accept fails for want of a resource.
bool ActivityServer::answer_pending() {
  for (;;) {
    const int c = accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        return true;
      ZCX_INFO(kLogInit, "activity server: accept: %s", errno_text(errno));
      return false;
    }
    UniqueFd conn(c);
    answer(conn.get());
  }
}

void ActivityServer::answer(int fd) {
  uint8_t q[kQueryBytes];
  const Deadline dl = Deadline::after_ms(kAnswerMs);
  if (socket_recv_all(fd, q, sizeof q, dl, "an activity query") != Status::kSuccess) return;
  wire::Reader r(q, sizeof q);
  const bool head = r.u32() == kQueryMagic && r.u16() == kVersion;
  (void)r.u16();
  const bool secret = r.u64() == secret_;
  const uint32_t from = r.u32();
  const bool to_us = r.u32() == static_cast<uint32_t>(rank_);
  if (!head || !secret || !to_us) {
    const bool warn = ++rejected_ <= kWarnRejects;
    ZCX_LOG(warn ? LogLevel::kWarn : LogLevel::kInfo, kLogInit,
            "rank %d: refused an activity query claiming rank %u: %s", rank_, from,
            !head ? "not a zcx query" : !secret ? "wrong job secret" : "addressed to another rank");
    return;
  }
  Departures::Activity a;
  (void)own_->own_activity(&a);  // no page: an answer of zeros (called nothing yet)
  uint8_t out[kAnswerBytes];
  encode_answer(rank_, a, out);
  (void)socket_send_all(fd, out, sizeof out, dl, "an activity query");
}

namespace {

// One query in flight.
struct Asking {
  UniqueFd fd;
  bool sent = false;
  uint8_t in[kAnswerBytes] = {};
  size_t got = 0;
  bool over = false;
};

// Moves one query a step on its poll events; marks it over when it has its reply.
void step(Asking& q, PeerActivity& out, int rank, const SockAddr& addr, uint64_t secret,
          int from) {
  if (!q.sent) {
    if (socket_connect_done(q.fd.get(), addr) == Status::kInProgress) return;
    uint8_t buf[kQueryBytes];
    encode_query(secret, from, rank, buf);
    q.sent = true;  // 32 bytes into a fresh socket's buffer: all or an error
    if (send(q.fd.get(), buf, sizeof buf, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof buf)) {
      out.reply = PeerActivity::Reply::kRefused, q.over = true;
      return;
    }
  }
  const ssize_t n = recv(q.fd.get(), q.in + q.got, sizeof q.in - q.got, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {  // closed unanswered: refused, or it is going away
    out.reply = PeerActivity::Reply::kRefused, q.over = true;
    return;
  }
  q.got += static_cast<size_t>(n);
  if (q.got < sizeof q.in) return;
  q.over = true;
  out.answered_ns = now_ns();
  out.reply = decode_answer(q.in, rank, out.answered_ns, &out.activity)
                  ? PeerActivity::Reply::kAnswered
                  : PeerActivity::Reply::kRefused;
}

}  // namespace

std::vector<PeerActivity> ask_activity(const std::vector<int>& ranks,
                                       const std::vector<SockAddr>& addrs, uint64_t secret,
                                       int from, int timeout_ms) {
  std::vector<PeerActivity> out(ranks.size());
  std::vector<Asking> qs(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i)
    if (i >= addrs.size() || addrs[i].len == 0 ||
        socket_connect_start(addrs[i], &qs[i].fd) != Status::kSuccess)
      out[i].reply = PeerActivity::Reply::kRefused, qs[i].over = true;
  const Deadline dl = Deadline::after_ms(timeout_ms);
  std::vector<pollfd> fds(ranks.size());
  for (;;) {
    size_t waiting = 0;
    for (size_t i = 0; i < qs.size(); ++i) {
      const auto events = static_cast<short>(qs[i].sent ? POLLIN : POLLOUT);
      fds[i] = {qs[i].over ? -1 : qs[i].fd.get(), events, 0};
      waiting += !qs[i].over;
    }
    if (waiting == 0 || dl.expired()) break;
    if (poll(fds.data(), fds.size(), dl.remaining_ms()) < 0 && errno != EINTR) break;
    for (size_t i = 0; i < qs.size(); ++i)
      if (!qs[i].over && fds[i].revents != 0)
        step(qs[i], out[i], ranks[i], addrs[i], secret, from);
  }
  return out;  // still waiting: kSilent
}

}  // namespace zcx
