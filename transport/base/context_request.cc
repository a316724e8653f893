// Endpoint send/receive, requests (post with retry, test, wait) and the registration cache.
#include "base/context_impl.h"

#include "common/check.h"
#include "common/config_vars.h"

#include <cstdint>
#include <thread>

namespace zcx {

const zcx_provider_ops_t* EndpointImpl::provider() const { return ctx_->slot(slot_).ops; }

Status EndpointImpl::isend(const void* buf, size_t size, int tag, Request** req) {
  ZCX_CHECK_ARG(req != nullptr, kLogNet, "isend: request output is NULL");
  ZCX_CHECK_ARG(buf != nullptr || size == 0, kLogNet, "isend: buffer is NULL");
  ZCX_CHECK_ARG(size <= PTRDIFF_MAX && reinterpret_cast<uintptr_t>(buf) <= UINTPTR_MAX - size,
                kLogNet, "isend: size %zu overflows the address space", size);
  ZCX_TRY(ctx_->check_usable());
  Request* r = ctx_->new_request(this, true, const_cast<void*>(buf), size, tag);
  Status s = ctx_->post(r);
  if (failed(s)) {
    ctx_->free_request(r);
    return s;
  }
  *req = r;
  return Status::kSuccess;
}

Status EndpointImpl::irecv(void* buf, size_t size, int tag, Request** req) {
  ZCX_CHECK_ARG(req != nullptr, kLogNet, "irecv: request output is NULL");
  ZCX_CHECK_ARG(buf != nullptr || size == 0, kLogNet, "irecv: buffer is NULL");
  ZCX_CHECK_ARG(size <= PTRDIFF_MAX && reinterpret_cast<uintptr_t>(buf) <= UINTPTR_MAX - size,
                kLogNet, "irecv: size %zu overflows the address space", size);
  ZCX_TRY(ctx_->check_usable());
  Request* r = ctx_->new_request(this, false, buf, size, tag);
  Status s = ctx_->post(r);
  if (failed(s)) {
    ctx_->free_request(r);
    return s;
  }
  *req = r;
  return Status::kSuccess;
}

Request* ContextImpl::new_request(EndpointImpl* ep, bool is_send, void* buf, size_t size, int tag) {
  auto* r = new Request;
  r->ep = ep;
  r->is_send = is_send;
  r->buf = buf;
  r->size = size;
  r->tag = tag;
  live_requests_.insert(r);
  return r;
}

void ContextImpl::free_request(Request* req) {
  live_requests_.erase(req);
  delete req;
}

// Posts to the provider. Leaves req->preq null (not an error) while the provider says
// "retry later" or, for a receive, while the peer's connection has not been accepted yet.
Status ContextImpl::post(Request* req) {
  EndpointImpl* ep = req->ep;
  ProviderSlot& p = providers_[ep->slot_];
  void* comm = req->is_send ? ep->send_comm_ : p.accepted[static_cast<size_t>(ep->peer_)];
  if (comm == nullptr) {
    ZCX_TRY(accept_pending(p));
    comm = p.accepted[static_cast<size_t>(ep->peer_)];
    if (comm == nullptr) return Status::kSuccess;
  }
  void* mh = nullptr;
  if ((p.ops->flags & ZCX_PROVIDER_NEEDS_REG) && req->size > 0)
    ZCX_TRY(mhandle_for(ep->slot_, comm, req->buf, req->size, &mh));
  zcx_status_t rc;
  if (req->is_send) {
    rc = p.ops->isend(comm, req->buf, req->size, req->tag, mh, &req->preq);
  } else {
    void* data = req->buf;
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
  ZCX_CHECK_ARG(req != nullptr && live_requests_.count(req), kLogNet,
                "test: not a live request (already completed, or never returned by isend/irecv)");
  ZCX_CHECK_ARG(done != nullptr, kLogNet, "test: done output is NULL");
  *done = false;
  ZCX_TRY(check_usable());
  if (req->preq == nullptr) {
    Status s = post(req);
    if (failed(s)) {
      free_request(req);
      return s;
    }
    if (req->preq == nullptr) return Status::kSuccess;
  }
  ProviderSlot& p = providers_[req->ep->slot_];
  int d = 0;
  size_t sizes[1] = {0};
  zcx_status_t rc = p.ops->test(req->preq, &d, sizes);
  if (rc != ZCX_SUCCESS) {
    Status s = set_error(static_cast<Status>(rc), kLogNet, "rank %d: %s %s %s %s failed: %s", rank(),
                         p.ops->name, req->is_send ? "send" : "receive",
                         req->is_send ? "to" : "from", who(req->ep->peer_).c_str(), last_error());
    free_request(req);
    return s;
  }
  if (!d) return Status::kSuccess;
  if (size) *size = sizes[0];
  free_request(req);
  *done = true;
  return Status::kSuccess;
}

Status ContextImpl::wait(Request* req, size_t* size) {
  ZCX_CHECK_ARG(req != nullptr && live_requests_.count(req), kLogNet, "wait: not a live request");
  int peer = req->ep->peer_;
  const char* name = providers_[req->ep->slot_].ops->name;
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  for (int spins = 0;; ++spins) {
    bool done = false;
    ZCX_TRY(test(req, &done, size));
    if (done) return Status::kSuccess;
    ZCX_TRY(progress());
    if (dl.expired())
      return set_error(Status::kTimeout, kLogNet,
                       "rank %d: a %s request with %s did not complete within ZCX_TIMEOUT (is "
                       "the peer alive, and did it post the matching call?)",
                       rank(), name, who(peer).c_str());
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status ContextImpl::mhandle_for(size_t slot, void* comm, void* buf, size_t size, void** mh) {
  auto key = std::make_tuple(slot, comm, buf, size);
  auto it = reg_cache_.find(key);
  if (it != reg_cache_.end()) {
    *mh = it->second;
    return Status::kSuccess;
  }
  ProviderSlot& p = providers_[slot];
  zcx_status_t rc = p.ops->reg_mr(comm, buf, size, ZCX_MEM_HOST, mh);
  if (rc != ZCX_SUCCESS)
    return set_error(static_cast<Status>(rc), kLogMem, "rank %d: %s cannot register %zu bytes at %p: %s",
                     rank(), p.ops->name, size, buf, last_error());
  reg_cache_.emplace(key, *mh);
  return Status::kSuccess;
}

void ContextImpl::release_registrations(const void* buf, size_t size) {
  auto lo = reinterpret_cast<uintptr_t>(buf);
  for (auto it = reg_cache_.begin(); it != reg_cache_.end();) {
    auto [slot, comm, ptr, len] = it->first;
    auto start = reinterpret_cast<uintptr_t>(ptr);
    bool inside = buf == nullptr || (start >= lo && start - lo < size && len <= size - (start - lo));
    if (!inside) {
      ++it;
      continue;
    }
    (void)providers_[slot].ops->dereg_mr(comm, it->second);
    it = reg_cache_.erase(it);
  }
}

Status ContextImpl::mem_register(void* buf, size_t size) {
  ZCX_CHECK_ARG(buf != nullptr && size > 0, kLogMem, "mem_register: NULL buffer or zero size");
  ZCX_CHECK_ARG(reinterpret_cast<uintptr_t>(buf) <= UINTPTR_MAX - size, kLogMem,
                "mem_register: size %zu overflows the address space", size);
  ZCX_TRY(check_usable());
  if (!user_regs_.emplace(reinterpret_cast<uintptr_t>(buf), size).second)
    return set_error(Status::kInvalidUsage, kLogMem, "mem_register: %p (%zu bytes) is already registered",
                     buf, size);
  return Status::kSuccess;
}

Status ContextImpl::mem_deregister(void* buf, size_t size) {
  if (user_regs_.erase({reinterpret_cast<uintptr_t>(buf), size}) == 0)
    return set_error(Status::kInvalidArg, kLogMem, "mem_deregister: %p (%zu bytes) is not registered",
                     buf, size);
  release_registrations(buf, size);
  return Status::kSuccess;
}

}  // namespace zcx
