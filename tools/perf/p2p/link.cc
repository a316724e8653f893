#include "p2p/link.h"

#include "common/clock.h"
#include "common/config_vars.h"
#include "common/log.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace zcx::perf {
namespace {

// Turns a provider's C status into ours, adding what we were doing when the provider did
// not say (its own message stays as the last error when it did).
Status check(zcx_status_t s, const char* what, const std::string& peer) {
  if (s == ZCX_SUCCESS) return Status::kSuccess;
  return set_error(static_cast<Status>(s), kLogNet, "%s with %s failed: %s (%s)", what,
                   peer.c_str(), zcx_status_string(s), last_error());
}

}  // namespace

void Link::FreeDeleter::operator()(unsigned char* p) const { std::free(p); }

Status Link::open(const zcx_provider_ops_t* ops, int dev, Bootstrap& bs, int peer,
                  size_t buf_bytes, std::unique_ptr<Link>* out) {
  std::unique_ptr<Link> link(new Link());
  link->peer_name_ = describe_peer(bs, peer);
  ZCX_TRY(link->init_provider(ops, dev, bs));
  ZCX_TRY(link->connect_peer(bs, peer));
  ZCX_TRY(link->register_buffers(buf_bytes));
  *out = std::move(link);
  return Status::kSuccess;
}

Status Link::init_provider(const zcx_provider_ops_t* ops, int dev, Bootstrap& bs) {
  zcx_provider_init_t self{};
  self.size = sizeof self;
  self.rank = bs.rank();
  self.nranks = bs.nranks();
  self.secret = bs.secret();
  std::snprintf(self.host, sizeof self.host, "%s", bs.host(bs.rank()).c_str());
  ops_ = ops;
  timeout_ms_ = params::timeout_ms();  // read once: an environment lookup per post would show
  ZCX_TRY(check(ops->init(&self, &ctx_), "provider init", "no peer yet"));
  int ndev = 0;
  ZCX_TRY(check(ops->devices(ctx_, &ndev), "device discovery", "no peer yet"));
  if (dev < 0 || dev >= ndev)
    return set_error(Status::kNoDevice, kLogNet,
                     "provider %s has %d device(s) on %s; --device %d does not exist "
                     "(zcx-info lists them)", ops->name, ndev, self.host, dev);
  dev_ = dev;
  ZCX_TRY(check(ops->get_properties(ctx_, dev, &props_), "get_properties", "no peer yet"));
  if ((props_.mem_kinds & ZCX_MEM_HOST) == 0)
    return set_error(Status::kUnsupported, kLogNet,
                     "provider %s device %d does not move host memory, and zcx-perf p2p "
                     "uses host buffers only", ops->name, dev);
  return Status::kSuccess;
}

// Every rank listens and publishes its handle; then we connect to the peer's handle and
// accept the peer's connection, driving both until both are up. Where the provider can send
// back over an accepted connection, the pair shares one connection as the context makes it:
// the higher rank (unless its ZCX_DUPLEX_WAIT is 0) sends back over the lower rank's
// connection instead of connecting, and the lower rank takes either kind of receiving side.
Status Link::connect_peer(Bootstrap& bs, int peer) {
  std::vector<unsigned char> handles(static_cast<size_t>(bs.nranks()) * ZCX_HANDLE_BYTES);
  unsigned char* mine = handles.data() + static_cast<size_t>(bs.rank()) * ZCX_HANDLE_BYTES;
  ZCX_TRY(check(ops_->listen(ctx_, dev_, mine, &listen_comm_), "listen", peer_name_));
  ZCX_TRY(bs.allgather(handles.data(), ZCX_HANDLE_BYTES));
  const unsigned char* theirs = handles.data() + static_cast<size_t>(peer) * ZCX_HANDLE_BYTES;
  const bool pairs = ops_->connect_reverse && ops_->accept_reverse && peer != bs.rank();
  const bool lower = bs.rank() < peer;
  const bool sends_back = pairs && !lower && params::duplex_wait_ns() > 0;
  Deadline deadline = Deadline::after_ms(params::timeout_ms());
  while (send_comm_ == nullptr || recv_comm_ == nullptr) {
    if (send_comm_ == nullptr && !sends_back)
      ZCX_TRY(check(ops_->connect(ctx_, dev_, theirs, &send_comm_), "connect", peer_name_));
    else if (send_comm_ == nullptr && recv_comm_ != nullptr)
      ZCX_TRY(check(ops_->connect_reverse(recv_comm_, &send_comm_), "connect back", peer_name_));
    if (recv_comm_ == nullptr)
      ZCX_TRY(check(ops_->accept(listen_comm_, &recv_comm_), "accept", peer_name_));
    if (recv_comm_ == nullptr && pairs && lower && send_comm_ != nullptr)
      ZCX_TRY(check(ops_->accept_reverse(send_comm_, &recv_comm_), "accept back", peer_name_));
    if (deadline.expired())
      return set_error(Status::kTimeout, kLogNet,
                       "no connection with %s over %s within ZCX_TIMEOUT (%s up, %s up); is "
                       "the peer running the same command?", peer_name_.c_str(), ops_->name,
                       send_comm_ ? "send" : "no send", recv_comm_ ? "recv" : "no recv");
  }
  return Status::kSuccess;
}

Status Link::register_buffers(size_t bytes) {
  bytes = (bytes + 4095) / 4096 * 4096;
  send_buf_.reset(static_cast<unsigned char*>(std::aligned_alloc(4096, bytes)));
  recv_buf_.reset(static_cast<unsigned char*>(std::aligned_alloc(4096, bytes)));
  if (!send_buf_ || !recv_buf_)
    return set_error(Status::kNoMemory, kLogNet, "cannot allocate 2 x %zu bytes", bytes);
  std::memset(send_buf_.get(), 0, bytes);  // touch every page before timing
  std::memset(recv_buf_.get(), 0, bytes);
  if (ops_->reg_mr == nullptr) return Status::kSuccess;
  ZCX_TRY(check(ops_->reg_mr(send_comm_, send_buf_.get(), bytes, ZCX_MEM_HOST, &send_mr_),
                "registering the send buffer", peer_name_));
  return check(ops_->reg_mr(recv_comm_, recv_buf_.get(), bytes, ZCX_MEM_HOST, &recv_mr_),
               "registering the receive buffer", peer_name_);
}

Link::~Link() {
  if (ops_ == nullptr) return;
  // Teardown failures are logged by the provider; nothing more to do with them here.
  if (send_mr_) (void)ops_->dereg_mr(send_comm_, send_mr_);
  if (recv_mr_) (void)ops_->dereg_mr(recv_comm_, recv_mr_);
  if (send_comm_) (void)ops_->close_send(send_comm_);
  if (recv_comm_) (void)ops_->close_recv(recv_comm_);
  if (listen_comm_) (void)ops_->close_listen(listen_comm_);
  if (ctx_) (void)ops_->finalize(ctx_);
}

Status Link::try_isend(size_t bytes, void** req) {
  *req = nullptr;
  return check(ops_->isend(send_comm_, send_buf_.get(), bytes, 0, send_mr_, req), "isend",
               peer_name_);
}

Status Link::try_irecv(size_t bytes, void** req) {
  *req = nullptr;
  void* data = recv_buf_.get();
  size_t size = bytes;
  int tag = 0;
  void* mr = recv_mr_;
  return check(ops_->irecv(recv_comm_, 1, &data, &size, &tag, &mr, req), "irecv", peer_name_);
}

Status Link::post_until_accepted(bool send, size_t bytes, void** req) {
  PollDeadline deadline(timeout_ms_);
  for (;;) {
    ZCX_TRY(send ? try_isend(bytes, req) : try_irecv(bytes, req));
    if (*req != nullptr) return Status::kSuccess;
    if (deadline.expired())
      return set_error(Status::kTimeout, kLogNet, "%s to %s not accepted within ZCX_TIMEOUT",
                       send ? "isend" : "irecv", peer_name_.c_str());
  }
}

Status Link::isend(size_t bytes, void** req) { return post_until_accepted(true, bytes, req); }
Status Link::irecv(size_t bytes, void** req) { return post_until_accepted(false, bytes, req); }

Status Link::test(void* req, bool* done, size_t* bytes) {
  int finished = 0;
  size_t size = 0;
  ZCX_TRY(check(ops_->test(req, &finished, &size), "test", peer_name_));
  *done = finished != 0;
  if (*done && bytes != nullptr) *bytes = size;
  return Status::kSuccess;
}

Status Link::wait(void* req, size_t* bytes) {
  PollDeadline deadline(timeout_ms_);
  bool done = false;
  while (!done) {
    ZCX_TRY(test(req, &done, bytes));
    if (!done && deadline.expired())
      return set_error(Status::kTimeout, kLogNet,
                       "transfer with %s made no progress within ZCX_TIMEOUT",
                       peer_name_.c_str());
  }
  return Status::kSuccess;
}

Status Link::wait_both(void* send_req, void* recv_req, size_t* recv_bytes) {
  PollDeadline deadline(timeout_ms_);
  bool send_done = false, recv_done = false;
  while (!send_done || !recv_done) {
    if (!send_done) ZCX_TRY(test(send_req, &send_done, nullptr));
    if (!recv_done) ZCX_TRY(test(recv_req, &recv_done, recv_bytes));
    if ((!send_done || !recv_done) && deadline.expired())
      return set_error(Status::kTimeout, kLogNet,
                       "exchange with %s made no progress within ZCX_TIMEOUT (send %s, "
                       "receive %s)", peer_name_.c_str(), send_done ? "done" : "pending",
                       recv_done ? "done" : "pending");
  }
  return Status::kSuccess;
}

}  // namespace zcx::perf
