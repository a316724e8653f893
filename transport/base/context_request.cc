// Endpoint send/receive, requests (post with retry, test, wait) and the registration cache.
#include "base/context_impl.h"

#include "common/check.h"
#include "common/config_vars.h"

#include <cstdint>
#include <cstring>
#include <thread>

namespace zcx {

const zcx_provider_ops_t* EndpointImpl::provider() const { return ctx_->slot(slot_).ops; }

bool EndpointImpl::moves_device_memory() const {
  const ProviderSlot& p = ctx_->slot(slot_);
  return (p.mem_kinds & ZCX_MEM_CUDA) != 0;
}

Status EndpointImpl::isend(const void* buf, size_t size, int tag, Request** req) {
  return transfer(true, const_cast<void*>(buf), size, tag, ZCX_MEM_HOST, req);
}
Status EndpointImpl::irecv(void* buf, size_t size, int tag, Request** req) {
  return transfer(false, buf, size, tag, ZCX_MEM_HOST, req);
}
Status EndpointImpl::isend_device(const void* buf, size_t size, int tag, Request** req) {
  return transfer(true, const_cast<void*>(buf), size, tag, ZCX_MEM_CUDA, req);
}
Status EndpointImpl::irecv_device(void* buf, size_t size, int tag, Request** req) {
  return transfer(false, buf, size, tag, ZCX_MEM_CUDA, req);
}

Status EndpointImpl::transfer(bool is_send, void* buf, size_t size, int tag, int mem_kind,
                              Request** req) {
  std::lock_guard<std::recursive_mutex> lock(ctx_->mutex());
  const char* what = is_send ? (mem_kind == ZCX_MEM_HOST ? "isend" : "isend_device")
                             : (mem_kind == ZCX_MEM_HOST ? "irecv" : "irecv_device");
  ZCX_CHECK_ARG(req != nullptr, kLogNet, "%s: request output is NULL", what);
  ZCX_CHECK_ARG(buf != nullptr || size == 0, kLogNet, "%s: buffer is NULL", what);
  ZCX_CHECK_ARG(size <= PTRDIFF_MAX && reinterpret_cast<uintptr_t>(buf) <= UINTPTR_MAX - size,
                kLogNet, "%s: size %zu overflows the address space", what, size);
  if (mem_kind != ZCX_MEM_HOST && !moves_device_memory())
    return set_error(Status::kUnsupported, kLogNet,
                     "%s: %s does not move GPU memory on this device (no GPUDirect RDMA)", what,
                     provider()->name);
  ZCX_TRY(ctx_->check_usable());
  Request* r = ctx_->new_request(this, is_send, buf, size, tag, mem_kind);
  ZCX_TRY(ctx_->post(r));  // on failure post has freed it
  *req = r;
  return Status::kSuccess;
}

Request* ContextImpl::new_request(EndpointImpl* ep, bool is_send, void* buf, size_t size, int tag,
                                  int mem_kind) {
  auto* r = new Request;
  r->mem_kind = mem_kind;
  r->ep = ep;
  r->is_send = is_send;
  r->buf = buf;
  r->size = size;
  r->tag = tag;
  live_requests_.insert(r);
  return r;
}

void ContextImpl::free_request(Request* req) {
  if (req->preq == nullptr && ok(req->error)) std::erase(req->ep->unposted_[req->is_send], req);
  if (req->bounce) bounce_free_.push_back(req->bounce);
  live_requests_.erase(req);
  delete req;
}

Status ContextImpl::post(Request* req) {
  req->ep->unposted_[req->is_send].push_back(req);
  flush_unposted(req->ep, req->is_send);
  Status s = req->error;
  if (failed(s)) free_request(req);
  return s;  // last_error() still holds post_now's message
}

// Posts queued requests in order until the provider says "retry later". A request that
// fails to post leaves the queue with its error, reported when it is tested.
void ContextImpl::flush_unposted(EndpointImpl* ep, bool sends) {
  std::deque<Request*>& q = ep->unposted_[sends];
  while (!q.empty()) {
    Request* req = q.front();
    Status s = post_now(req);
    if (failed(s)) {
      req->error = s;
      req->error_text = last_error();
    } else if (req->preq == nullptr) {
      break;
    }
    q.pop_front();
  }
}

// Posts to the provider. Leaves req->preq null (not an error) while the provider says
// "retry later" or, for a receive, while the peer's connection has not been accepted yet.
Status ContextImpl::post_now(Request* req) {
  EndpointImpl* ep = req->ep;
  ProviderSlot& p = providers_[ep->slot_];
  void* comm = req->is_send ? ep->send_comm_ : p.accepted[static_cast<size_t>(ep->peer_)];
  if (comm == nullptr && req->is_send) {
    ZCX_TRY(open_send(ep));
    comm = ep->send_comm_;
    if (comm == nullptr) return Status::kSuccess;
  } else if (comm == nullptr) {
    if (ep->recv_error_.has()) return ep->recv_error_.raise();
    ZCX_TRY(accept_pending(p));
    comm = p.accepted[static_cast<size_t>(ep->peer_)];
    if (comm == nullptr) return Status::kSuccess;
  }
  if (!req->bounce && bounces(req) && (req->bounce = take_bounce()) && req->is_send)
    memcpy(req->bounce, req->buf, req->size);
  if ((p.ops->flags & ZCX_PROVIDER_NEEDS_REG) && req->size > 0 && !req->reg)
    ZCX_TRY(registration_for(req, comm, &req->reg));  // kept across "retry later"
  void* mh = req->reg ? req->reg->mh : nullptr;
  zcx_status_t rc;
  if (req->is_send) {
    rc = p.ops->isend(comm, req->wire(), req->size, req->tag, mh, &req->preq);
  } else {
    void* data = req->wire();
    size_t size = req->size;
    int tag = req->tag;
    rc = p.ops->irecv(comm, 1, &data, &size, &tag, &mh, &req->preq);
  }
  if (rc != ZCX_SUCCESS)
    return set_error(static_cast<Status>(rc), kLogNet, "rank %d: %s %s of %zu bytes %s %s failed: %s",
                     rank(), p.ops->name, req->is_send ? "send" : "receive", req->size,
                     req->is_send ? "to" : "from", who(ep->peer_).c_str(), last_error());
  return Status::kSuccess;
}

Status ContextImpl::test(Request* req, bool* done, size_t* size) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  ZCX_CHECK_ARG(req != nullptr && live_requests_.count(req), kLogNet,
                "test: not a live request (already completed, or never returned by isend/irecv)");
  ZCX_CHECK_ARG(done != nullptr, kLogNet, "test: done output is NULL");
  *done = false;
  ZCX_TRY(check_usable());
  // Like MPI_Test, testing one request drives the others (queued posts, accepts): a caller
  // polling only its receive must not starve its own queued send.
  ZCX_TRY(progress());
  if (failed(req->error)) {
    Status s = set_error_quiet(req->error, "%s", req->error_text.c_str());
    free_request(req);
    return s;
  }
  if (req->preq == nullptr) return Status::kSuccess;
  int d = 0;
  size_t sizes[1] = {0};
  zcx_status_t rc = provider_test(req, &d, sizes);
  if (rc != ZCX_SUCCESS) {
    Status s = test_failure(req, rc);
    free_request(req);
    return s;
  }
  if (!d) return Status::kSuccess;
  if (!req->flushing) {
    req->moved = sizes[0];
    bool flushing = false;
    ZCX_TRY(start_flush(req, &flushing));  // on failure it has freed req
    if (flushing) return Status::kSuccess;
  }
  if (req->bounce && !req->is_send) memcpy(req->buf, req->bounce, req->moved);
  if (size) *size = req->moved;
  free_request(req);
  *done = true;
  return Status::kSuccess;
}

zcx_status_t ContextImpl::provider_test(Request* req, int* done, size_t* moved) {
  if (!req->provider_done) return providers_[req->ep->slot_].ops->test(req->preq, done, moved);
  req->provider_done = false;
  *done = 1;
  moved[0] = req->provider_moved;
  return ZCX_SUCCESS;
}

Status ContextImpl::test_failure(const Request* req, zcx_status_t rc) {
  const ProviderSlot& p = providers_[req->ep->slot_];
  return set_error(static_cast<Status>(rc), kLogNet, "rank %d: %s %s %s %s failed: %s", rank(),
                   p.ops->name, req->is_send ? "send" : "receive", req->is_send ? "to" : "from",
                   who(req->ep->peer_).c_str(), last_error());
}

// A failure found here is kept in the request (its provider request is gone) and reported
// by the request's own next test, as a failed post is.
Status ContextImpl::progress_requests(const Request* except) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  ZCX_TRY(check_usable());
  for (Request* r : live_requests_) {
    if (r == except || r->preq == nullptr || r->provider_done || failed(r->error)) continue;
    int d = 0;
    size_t sizes[1] = {0};
    zcx_status_t rc = providers_[r->ep->slot_].ops->test(r->preq, &d, sizes);
    if (rc != ZCX_SUCCESS) {
      r->error = test_failure(r, rc);
      r->error_text = last_error();
      r->preq = nullptr;
    } else if (d) {
      r->provider_done = true;
      r->provider_moved = sizes[0];
    }
  }
  return Status::kSuccess;
}

// NCCL's rule: data a NIC wrote into GPU memory may not yet be visible to the GPU when the
// receive completes; a device that says needs_flush orders it with iflush (NCCL's own ib
// transport reads the buffer back over RDMA). Host memory and sends never need one.
Status ContextImpl::start_flush(Request* req, bool* started) {
  *started = false;
  ProviderSlot& p = providers_[req->ep->slot_];
  if (req->is_send || req->mem_kind != ZCX_MEM_CUDA || !p.needs_flush || req->moved == 0 ||
      p.ops->iflush == nullptr)
    return Status::kSuccess;
  void* comm = p.accepted[static_cast<size_t>(req->ep->peer_)];
  void* data = req->buf;
  size_t size = req->moved;
  void* flush = nullptr;
  void* mh = req->reg ? req->reg->mh : nullptr;
  zcx_status_t rc = p.ops->iflush(comm, 1, &data, &size, &mh, &flush);
  if (rc != ZCX_SUCCESS) {
    Status s = set_error(static_cast<Status>(rc), kLogNet,
                         "rank %d: %s flush of a receive from %s failed: %s", rank(),
                         p.ops->name, who(req->ep->peer_).c_str(), last_error());
    free_request(req);
    return s;
  }
  req->preq = flush;  // null: the provider had nothing to flush
  req->flushing = flush != nullptr;
  *started = req->flushing;
  return Status::kSuccess;
}

Status ContextImpl::wait(Request* req, size_t* size) {
  int peer = -1;
  const char* name = "";
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    ZCX_CHECK_ARG(req != nullptr && live_requests_.count(req), kLogNet, "wait: not a live request");
    peer = req->ep->peer_;
    name = providers_[req->ep->slot_].ops->name;
  }
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  for (int spins = 0;; ++spins) {
    bool done = false;
    ZCX_TRY(test(req, &done, size));  // test drives progress; each call takes the lock
    if (done) return Status::kSuccess;
    ZCX_TRY(progress_requests(req));
    if (dl.expired())
      return set_error(Status::kTimeout, kLogNet,
                       "rank %d: a %s request with %s did not complete within ZCX_TIMEOUT (is "
                       "the peer alive, and did it post the matching call?)",
                       rank(), name, who(peer).c_str());
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A registered range first, else a held one.
bool ContextImpl::covering_range(const void* buf, size_t size, RangeCounts::Range* range) const {
  const auto lo = reinterpret_cast<uintptr_t>(buf);
  return user_regs_.covering(lo, size, range) || held_.covering(lo, size, range);
}

Status ContextImpl::register_range(size_t slot, void* comm, void* buf, size_t size, int kind,
                                   void** mh) {
  ProviderSlot& p = providers_[slot];
  zcx_status_t rc = p.ops->reg_mr(comm, buf, size, kind, mh);
  if (rc != ZCX_SUCCESS)
    return set_error(static_cast<Status>(rc), kLogMem,
                     "rank %d: %s cannot register %zu bytes %sat %p: %s", rank(), p.ops->name,
                     size, kind == ZCX_MEM_CUDA ? "of GPU memory " : "", buf, last_error());
  return Status::kSuccess;
}

// A range's registration is made once per comm and cached until the range goes. Where the
// whole range cannot be registered (a hold may span memory the provider refuses as one
// piece), the request falls back to a registration of its own.
Status ContextImpl::registration_for(const Request* req, void* comm,
                                     std::shared_ptr<Registration>* out) {
  const size_t slot = req->ep->slot_;
  const zcx_provider_ops_t* ops = providers_[slot].ops;
  RangeCounts::Range range;
  if (covering_range(req->wire(), req->size, &range)) {
    auto key = std::make_tuple(slot, comm, range.first, range.second);
    if (auto it = reg_cache_.find(key); it != reg_cache_.end()) {
      *out = it->second;
      return Status::kSuccess;
    }
    void* mh = nullptr;
    if (ok(register_range(slot, comm, reinterpret_cast<void*>(range.first), range.second,
                          req->mem_kind, &mh))) {
      *out = reg_cache_.emplace(key, std::make_shared<Registration>(ops, comm, mh)).first->second;
      return Status::kSuccess;
    }
    ZCX_INFO(kLogMem, "rank %d: registering the request's own bytes instead (%s)", rank(),
             last_error());
  }
  void* mh = nullptr;
  ZCX_TRY(register_range(slot, comm, req->wire(), req->size, req->mem_kind, &mh));
  *out = std::make_shared<Registration>(ops, comm, mh);
  return Status::kSuccess;
}

// Small host transfers over a registering provider, unless the caller registered the bytes
// (a held range bounces too).
bool ContextImpl::bounces(const Request* req) const {
  RangeCounts::Range range;
  const auto lo = reinterpret_cast<uintptr_t>(req->buf);
  return (providers_[req->ep->slot_].ops->flags & ZCX_PROVIDER_NEEDS_REG) &&
         req->mem_kind == ZCX_MEM_HOST && req->size > 0 && req->size <= kBounceBytes &&
         !user_regs_.covering(lo, req->size, &range);
}

// A free block, from a new slab when none is left (its registration is cached like a
// registered range's). nullptr when memory is short: the transfer registers its own bytes.
char* ContextImpl::take_bounce() {
  if (bounce_free_.empty()) {
    constexpr size_t kSlab = kBounceBytes * kBounceSlabBlocks;
    char* slab = static_cast<char*>(std::aligned_alloc(4096, kSlab));
    if (slab == nullptr) return nullptr;
    bounce_slabs_.emplace_back(slab);
    user_regs_.add({reinterpret_cast<uintptr_t>(slab), kSlab});
    for (size_t i = kBounceSlabBlocks; i-- > 0;) bounce_free_.push_back(slab + i * kBounceBytes);
  }
  char* b = bounce_free_.back();
  bounce_free_.pop_back();
  return b;
}

void ContextImpl::release_registrations(const void* buf, size_t size) {
  const auto lo = reinterpret_cast<uintptr_t>(buf);
  std::erase_if(reg_cache_, [&](const auto& entry) {
    const auto& [slot, comm, start, len] = entry.first;
    if (buf == nullptr) return true;
    const bool inside = start >= lo && start - lo <= size && len <= size - (start - lo);
    return inside && !user_regs_.contains({start, len}) && !held_.contains({start, len});
  });  // a request still posted with one keeps it alive until the request ends
}

void ContextImpl::hold_range(const void* buf, size_t size) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (buf != nullptr && size > 0) held_.add({reinterpret_cast<uintptr_t>(buf), size});
}

void ContextImpl::release_range(const void* buf, size_t size) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  (void)uncount(held_, buf, size);
}

bool ContextImpl::uncount(RangeCounts& ranges, const void* buf, size_t size) {
  const int left = ranges.remove({reinterpret_cast<uintptr_t>(buf), size});
  if (left == 0) release_registrations(buf, size);
  return left >= 0;
}

Status ContextImpl::mem_register(void* buf, size_t size) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  ZCX_CHECK_ARG(buf != nullptr && size > 0, kLogMem, "mem_register: NULL buffer or zero size");
  ZCX_CHECK_ARG(reinterpret_cast<uintptr_t>(buf) <= UINTPTR_MAX - size, kLogMem,
                "mem_register: size %zu overflows the address space", size);
  ZCX_TRY(check_usable());
  user_regs_.add({reinterpret_cast<uintptr_t>(buf), size});  // counted: one per caller
  return Status::kSuccess;
}

Status ContextImpl::mem_deregister(void* buf, size_t size) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!uncount(user_regs_, buf, size))
    return set_error(Status::kInvalidArg, kLogMem, "mem_deregister: %p (%zu bytes) is not registered",
                     buf, size);
  return Status::kSuccess;
}

}  // namespace zcx
