// Bootstrap entry points, allgather/barrier over the star, framing, failure and abort.
#include "common/bootstrap/bootstrap_internal.h"
#include "common/check.h"
#include "common/config_vars.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace zcx {
namespace {
constexpr size_t kMaxErrorText = 4096;
}  // namespace

Status Bootstrap::init(const UniqueId& id, int rank, int nranks, std::unique_ptr<Bootstrap>* out) {
  ZCX_CHECK_ARG(out != nullptr, kLogBootstrap, "bootstrap output is NULL");
  ZCX_CHECK_ARG(nranks >= 1 && nranks <= (1 << 24), kLogBootstrap, "nranks %d out of range", nranks);
  ZCX_CHECK_ARG(rank >= 0 && rank < nranks, kLogBootstrap, "rank %d out of range [0,%d)", rank,
                nranks);
  ZCX_CHECK_ARG(id.secret != 0 && id.root.port() != 0, kLogBootstrap,
                "unique id has no secret or no root port");
  log_set_rank(rank);  // the log prefix and ZCX_DEBUG_FILE's %r, from here on
  auto bs = std::make_unique<SocketBootstrap>(id, rank, nranks);
  UniqueFd reserved = rank == 0 ? take_reserved_listener(id) : UniqueFd();
  ZCX_TRY(bs->start(std::move(reserved)));
  *out = std::move(bs);
  return Status::kSuccess;
}

Status Bootstrap::init_from_env(std::unique_ptr<Bootstrap>* out) {
  LaunchInfo info;
  ZCX_TRY(launch_info_from_env(&info));
  log_set_rank(info.rank);  // already for the line below (init() sets it again)
  ZCX_INFO(kLogBootstrap, "launched by %s: rank %d of %d, root %s", info.source.c_str(), info.rank,
           info.nranks, info.id.root.to_string().c_str());
  return init(info.id, info.rank, info.nranks, out);
}

std::string describe_peer(const Bootstrap& bs, int rank) {
  return "rank " + std::to_string(rank) + " (" + bs.host(rank) + ")";
}

Status SocketBootstrap::check_usable() const {
  if (aborted_.load())
    return set_error_quiet(Status::kAborted, "rank %d: the bootstrap was aborted", rank_);
  if (failed_.load())
    return set_error_quiet(Status::kAborted,
                           "an earlier bootstrap collective failed; the job cannot continue");
  return Status::kSuccess;
}

Status SocketBootstrap::write_frame(int fd, bootwire::FrameType type, uint32_t tag,
                                    const void* data, size_t len, const Deadline& dl,
                                    const std::string& who) {
  uint8_t hdr[bootwire::kFrameHeaderBytes];
  bootwire::encode_frame_header({type, tag, len}, hdr);
  Status s = socket_send_all(fd, hdr, sizeof hdr, dl, who.c_str());
  if (ok(s) && len > 0) s = socket_send_all(fd, data, len, dl, who.c_str());
  return s;
}

// Reads a header; an Error frame is consumed here and returned as kRemote with its text.
Status SocketBootstrap::read_frame(int fd, bootwire::FrameHeader* h, const Deadline& dl,
                                   const std::string& who) {
  uint8_t hdr[bootwire::kFrameHeaderBytes];
  Status s = socket_recv_all(fd, hdr, sizeof hdr, dl, who.c_str());
  if (failed(s))
    return set_error(s, kLogBootstrap, "rank %d (%s): %s%s", rank_, my_host_.c_str(), last_error(),
                     s == Status::kRemote ? " (did it exit or crash?)" : "");
  if (failed(bootwire::decode_frame_header(hdr, h)))
    return set_error(Status::kProtocol, kLogBootstrap, "rank %d: malformed bootstrap frame from %s",
                     rank_, who.c_str());
  if (h->type != bootwire::FrameType::kError) return Status::kSuccess;
  std::string text(std::min<uint64_t>(h->len, kMaxErrorText), '\0');
  if (h->len > kMaxErrorText ||
      failed(socket_recv_all(fd, text.data(), text.size(), dl, who.c_str())))
    text = "(unreadable reason)";
  failed_ = true;
  return set_error(Status::kRemote, kLogBootstrap, "rank %d: %s reports a failure: %s", rank_,
                   who.c_str(), text.c_str());
}

Status SocketBootstrap::root_fail(Status s, const std::string& message) {
  failed_ = true;
  Deadline dl = Deadline::after_ms(std::min<int64_t>(params::timeout_ms(), 2000));
  for (UniqueFd& fd : root_conns_)
    if (fd.valid()) {
      Status ignored = write_frame(fd.get(), bootwire::FrameType::kError, 0, message.data(),
                                   std::min(message.size(), kMaxErrorText), dl, "peer");
      (void)ignored;
    }
  return set_error(s, kLogBootstrap, "%s", message.c_str());
}

Status SocketBootstrap::allgather(void* data, size_t bytes) {
  ZCX_CHECK_ARG(data != nullptr || bytes == 0, kLogBootstrap, "allgather buffer is NULL");
  ZCX_CHECK_ARG(bytes <= bootwire::kMaxFrameBytes / static_cast<size_t>(nranks_), kLogBootstrap,
                "allgather of %zu bytes per rank x %d ranks exceeds the bootstrap frame limit",
                bytes, nranks_);
  std::lock_guard<std::mutex> lock(op_mu_);
  ZCX_TRY(check_usable());
  uint32_t seq = ++seq_;
  auto* p = static_cast<uint8_t*>(data);
  if (nranks_ == 1) return Status::kSuccess;
  Status s = rank_ == 0 ? root_allgather(p, bytes, seq) : client_allgather(p, bytes, seq);
  return failed(s) && aborted_.load() ? check_usable() : s;  // abort() shut the sockets
}

Status SocketBootstrap::barrier() { return allgather(nullptr, 0); }

// Gathers from every rank in whatever order they arrive (poll), so a dead rank is noticed at
// once even while another is still on its way; then sends everyone the result.
Status SocketBootstrap::root_allgather(uint8_t* data, size_t bytes, uint32_t seq) {
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  std::vector<int> waiting;
  for (int r = 1; r < nranks_; ++r) waiting.push_back(r);
  while (!waiting.empty()) {
    if (dl.expired()) {
      std::string list;
      for (size_t i = 0; i < waiting.size() && i < 16; ++i)
        list += (i ? "," : "") + std::to_string(waiting[i]);
      return root_fail(Status::kTimeout,
                       "bootstrap root: " + std::string(waiting.size() > 1 ? "ranks " : "rank ") +
                           list + " (" + host(waiting[0]) + (waiting.size() > 1 ? ", ..." : "") +
                           ") did not enter allgather/barrier #" + std::to_string(seq) +
                           " within ZCX_TIMEOUT (stuck, or its calls differ from the other ranks')");
    }
    std::vector<pollfd> fds;
    for (int r : waiting) fds.push_back({root_conns_[static_cast<size_t>(r)].get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), std::min(dl.remaining_ms(), 100)) <= 0) continue;
    std::vector<int> still;
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (!fds[i].revents) {
        still.push_back(waiting[i]);
        continue;
      }
      ZCX_TRY(root_gather_one(waiting[i], data, bytes, seq, dl));
    }
    waiting.swap(still);
  }
  size_t total = bytes * static_cast<size_t>(nranks_);
  for (int r = 1; r < nranks_; ++r) {
    Status s = write_frame(root_conns_[static_cast<size_t>(r)].get(),
                           bootwire::FrameType::kGatherResult, seq, data, total, dl, who(r));
    if (failed(s)) return root_fail(s, std::string("bootstrap root: ") + last_error());
  }
  return Status::kSuccess;
}

// Reads rank r's Gather frame (it is readable) into its slot; any problem fails the job.
Status SocketBootstrap::root_gather_one(int r, uint8_t* data, size_t bytes, uint32_t seq,
                                        const Deadline& dl) {
  int fd = root_conns_[static_cast<size_t>(r)].get();
  bootwire::FrameHeader h;
  Status s = read_frame(fd, &h, dl, who(r));
  if (failed(s)) return root_fail(s, std::string("bootstrap root ") + last_error());
  if (h.type != bootwire::FrameType::kGather || h.tag != seq || h.len != bytes)
    return root_fail(Status::kMismatch,
                     "bootstrap root: " + who(r) + " sent collective #" + std::to_string(h.tag) +
                         " with " + std::to_string(h.len) + " bytes, rank 0 is in #" +
                         std::to_string(seq) + " with " + std::to_string(bytes) +
                         " bytes (ranks call allgather/barrier differently)");
  s = socket_recv_all(fd, data + static_cast<size_t>(r) * bytes, bytes, dl, who(r).c_str());
  if (failed(s)) return root_fail(s, std::string("bootstrap root: ") + last_error());
  return Status::kSuccess;
}

Status SocketBootstrap::client_allgather(uint8_t* data, size_t bytes, uint32_t seq) {
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  const std::string root = who(0) + " (the bootstrap root)";
  Status s = write_frame(root_conn_.get(), bootwire::FrameType::kGather, seq,
                         data + static_cast<size_t>(rank_) * bytes, bytes, dl, root);
  if (failed(s)) {
    failed_ = true;
    return error_from_root(s);
  }
  // The root bounds its own wait by ZCX_TIMEOUT and then reports who failed; wait a little
  // longer than that so its report, not our own timeout, names the culprit.
  Deadline result_dl = Deadline::after_ms(params::timeout_ms() + 1000);
  bootwire::FrameHeader h;
  s = read_frame(root_conn_.get(), &h, result_dl, root);
  size_t total = bytes * static_cast<size_t>(nranks_);
  if (ok(s) && (h.type != bootwire::FrameType::kGatherResult || h.tag != seq || h.len != total))
    s = set_error(Status::kProtocol, kLogBootstrap,
                  "rank %d: unexpected reply from %s to collective #%u", rank_, root.c_str(), seq);
  if (ok(s)) {
    s = socket_recv_all(root_conn_.get(), data, total, result_dl, root.c_str());
    if (failed(s)) s = set_error(s, kLogBootstrap, "rank %d: %s", rank_, last_error());
  }
  if (failed(s)) failed_ = true;
  return s;
}

// Sending to the root failed: it has probably failed the job and closed. Its Error frame,
// which names the rank that failed, may already be waiting in our receive buffer; prefer it.
Status SocketBootstrap::error_from_root(Status s) {
  std::string own = last_error();
  pollfd p{root_conn_.get(), POLLIN, 0};
  if (poll(&p, 1, 200) > 0) {
    bootwire::FrameHeader h;
    h.type = bootwire::FrameType::kTable;  // anything but kError until a header is read
    Status r = read_frame(root_conn_.get(), &h, Deadline::after_ms(200), who(0) + " (the bootstrap root)");
    if (r == Status::kRemote && h.type == bootwire::FrameType::kError) return r;
  }
  return set_error(s, kLogBootstrap, "rank %d: %s", rank_, own.c_str());
}

void SocketBootstrap::track_fd(int fd) {
  std::lock_guard<std::mutex> lock(fd_mu_);
  live_fds_.push_back(fd);
  if (aborted_.load()) ::shutdown(fd, SHUT_RDWR);
}

void SocketBootstrap::untrack_fd(int fd) {
  std::lock_guard<std::mutex> lock(fd_mu_);
  std::erase(live_fds_, fd);
}

// Shuts every socket down so that a call blocked in another thread returns at once; the
// fds themselves are closed by the destructor. Bounded (no waits) and idempotent.
void SocketBootstrap::abort() {
  if (aborted_.exchange(true)) return;
  std::lock_guard<std::mutex> lock(fd_mu_);
  for (int fd : live_fds_) ::shutdown(fd, SHUT_RDWR);
  ZCX_INFO(kLogBootstrap, "rank %d: bootstrap aborted", rank_);
}

}  // namespace zcx
