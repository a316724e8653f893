// Public C API: endpoints, registration and point-to-point messages. Every handle and
// argument is checked; a bad one is ZCX_ERR_INVALID_ARG, never a crash.
#include "base/api_internal.h"

#include "common/check.h"
#include "common/dl/device_memory.h"

#include <cstdint>
#include <new>

using namespace zcx;

namespace {

Status check_live(const void* h, const char* what) {
  ZCX_CHECK_ARG(h != nullptr && handle_live(h), kLogNet,
                "not a live zcx %s (NULL, already finished, or finalized)", what);
  return Status::kSuccess;
}

Status check_buffer(const void* buf, size_t size, const char* fn) {
  ZCX_CHECK_ARG(buf != nullptr || size == 0, kLogNet, "%s: buffer is NULL", fn);
  ZCX_CHECK_ARG(size <= PTRDIFF_MAX && reinterpret_cast<uintptr_t>(buf) <= UINTPTR_MAX - size,
                kLogNet, "%s: size %zu overflows the address space", fn, size);
  // The providers copy these buffers with the CPU (or the kernel), which faults on device
  // memory: a GPU buffer passed here by mistake is an error, not a crash.
  ZCX_CHECK_ARG(size == 0 || !cuda_is_device_memory(buf), kLogNet,
                "%s: buffer %p is GPU memory; zcx_isend/zcx_irecv move host memory (device "
                "buffers go through zcx_coll_isend/zcx_coll_irecv with a CUDA stream)", fn, buf);
  return Status::kSuccess;
}

zcx_status_t wrap_request(zcx_endpoint_t ep, Request* r, zcx_request_t* out) {
  auto* w = new (std::nothrow) zcx_request{ep->owner, r};
  if (w == nullptr) return to_c(set_error(Status::kNoMemory, kLogNet, "out of memory"));
  std::lock_guard<std::mutex> lock(ep->owner->mu);
  ep->owner->requests.insert(w);
  handle_add(w);
  *out = w;
  return ZCX_SUCCESS;
}

void drop_request(zcx_request_t req) {
  handle_remove(req);
  std::lock_guard<std::mutex> lock(req->owner->mu);
  req->owner->requests.erase(req);
  delete req;
}

}  // namespace

extern "C" {

ZCX_API zcx_status_t zcx_endpoint_get(zcx_context_t ctx, int peer, zcx_endpoint_t* ep) {
  if (Status s = check_live(ctx, "context"); failed(s)) return to_c(s);
  if (ep == nullptr) return to_c(set_error(Status::kInvalidArg, kLogNet, "zcx_endpoint_get: ep is NULL"));
  std::lock_guard<std::mutex> lock(ctx->mu);
  auto it = ctx->endpoints.find(peer);
  if (it == ctx->endpoints.end()) {
    Endpoint* e = nullptr;
    Status s = ctx->ctx->endpoint(peer, &e);
    if (failed(s)) return to_c(s);
    it = ctx->endpoints.emplace(peer, std::make_unique<zcx_endpoint>(zcx_endpoint{ctx, e})).first;
    handle_add(it->second.get());
  }
  *ep = it->second.get();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_endpoint_provider(zcx_endpoint_t ep, const char** name) {
  if (Status s = check_live(ep, "endpoint"); failed(s)) return to_c(s);
  if (name == nullptr) return to_c(set_error(Status::kInvalidArg, kLogNet, "zcx_endpoint_provider: name is NULL"));
  *name = ep->ep->provider()->name;
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_mem_register(zcx_context_t ctx, void* buf, size_t size, zcx_memreg_t* reg) {
  if (Status s = check_live(ctx, "context"); failed(s)) return to_c(s);
  if (reg == nullptr) return to_c(set_error(Status::kInvalidArg, kLogMem, "zcx_mem_register: reg is NULL"));
  if (Status s = check_buffer(buf, size, "zcx_mem_register"); failed(s)) return to_c(s);
  Status s = ctx->ctx->mem_register(buf, size);
  if (failed(s)) return to_c(s);
  auto* m = new (std::nothrow) zcx_memreg{buf, size};
  if (m == nullptr) return to_c(set_error(Status::kNoMemory, kLogMem, "out of memory"));
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->regs.insert(m);
  }
  handle_add(m);
  *reg = m;
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_mem_deregister(zcx_context_t ctx, zcx_memreg_t reg) {
  if (Status s = check_live(ctx, "context"); failed(s)) return to_c(s);
  if (Status s = check_live(reg, "registration"); failed(s)) return to_c(s);
  std::lock_guard<std::mutex> lock(ctx->mu);
  if (ctx->regs.count(reg) == 0)
    return to_c(set_error(Status::kInvalidArg, kLogMem, "zcx_mem_deregister: registration belongs to another context"));
  Status s = ctx->ctx->mem_deregister(reg->buf, reg->size);
  ctx->regs.erase(reg);
  handle_remove(reg);
  delete reg;
  return to_c(s);
}

ZCX_API zcx_status_t zcx_isend(zcx_endpoint_t ep, const void* buf, size_t size, zcx_request_t* req) {
  if (Status s = check_live(ep, "endpoint"); failed(s)) return to_c(s);
  if (req == nullptr) return to_c(set_error(Status::kInvalidArg, kLogNet, "zcx_isend: req is NULL"));
  if (Status s = check_buffer(buf, size, "zcx_isend"); failed(s)) return to_c(s);
  Request* r = nullptr;
  Status s = ep->ep->isend(buf, size, 0, &r);
  return failed(s) ? to_c(s) : wrap_request(ep, r, req);
}

ZCX_API zcx_status_t zcx_irecv(zcx_endpoint_t ep, void* buf, size_t size, zcx_request_t* req) {
  if (Status s = check_live(ep, "endpoint"); failed(s)) return to_c(s);
  if (req == nullptr) return to_c(set_error(Status::kInvalidArg, kLogNet, "zcx_irecv: req is NULL"));
  if (Status s = check_buffer(buf, size, "zcx_irecv"); failed(s)) return to_c(s);
  Request* r = nullptr;
  Status s = ep->ep->irecv(buf, size, 0, &r);
  return failed(s) ? to_c(s) : wrap_request(ep, r, req);
}

ZCX_API zcx_status_t zcx_test(zcx_request_t req, int* done, size_t* size) {
  if (Status s = check_live(req, "request"); failed(s)) return to_c(s);
  if (done == nullptr) return to_c(set_error(Status::kInvalidArg, kLogNet, "zcx_test: done is NULL"));
  Context& ctx = *req->owner->ctx;
  bool finished = false;
  size_t moved = 0;
  Status s = ctx.test(req->req, &finished, &moved);
  if (ok(s) && !finished) s = ctx.progress_requests(req->req);  // like MPI_Test
  *done = finished ? 1 : 0;
  if (finished && size) *size = moved;
  if (finished || !ctx.request_live(req->req)) drop_request(req);
  return to_c(s);
}

// On ZCX_ERR_TIMEOUT the request stays valid; after any other error it is gone.
ZCX_API zcx_status_t zcx_wait(zcx_request_t req, size_t* size) {
  if (Status s = check_live(req, "request"); failed(s)) return to_c(s);
  Context& ctx = *req->owner->ctx;
  size_t moved = 0;
  Status s = ctx.wait(req->req, &moved);
  if (ok(s) && size) *size = moved;
  if (!ctx.request_live(req->req)) drop_request(req);
  return to_c(s);
}

ZCX_API zcx_status_t zcx_send(zcx_endpoint_t ep, const void* buf, size_t size) {
  zcx_request_t req = nullptr;
  zcx_status_t rc = zcx_isend(ep, buf, size, &req);
  return rc == ZCX_SUCCESS ? zcx_wait(req, nullptr) : rc;
}

ZCX_API zcx_status_t zcx_recv(zcx_endpoint_t ep, void* buf, size_t size, size_t* received) {
  zcx_request_t req = nullptr;
  zcx_status_t rc = zcx_irecv(ep, buf, size, &req);
  return rc == ZCX_SUCCESS ? zcx_wait(req, received) : rc;
}

}  // extern "C"
