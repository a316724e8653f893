// The ops table of the ucx provider: C entry points that check their arguments, call into
// zcx::ucx, and never let an exception out.
#include "ucx/ucx.h"
#include "ucx/ucx_ep_state.h"

#include <new>

namespace zcx::ucx {
namespace {

template <typename Fn>
zcx_status_t guarded(const char* op, Fn&& fn) {
  try {
    return to_c(fn());
  } catch (const std::bad_alloc&) {
    return to_c(set_error(Status::kNoMemory, kLog, "ucx %s: out of memory", op));
  } catch (...) {
    return to_c(set_error(Status::kInternal, kLog, "ucx %s: unexpected exception", op));
  }
}

Status usable(Ctx* ctx, int dev) {
  if (ctx == nullptr) return set_error(Status::kInvalidArg, kLog, "ucx: NULL context");
  if (ctx->worker == nullptr)
    return set_error(Status::kNoDevice, kLog, "ucx: no device: %s", ctx->unavailable.c_str());
  if (dev != 0) return set_error(Status::kInvalidArg, kLog, "ucx: no device %d (only 0)", dev);
  return Status::kSuccess;
}

zcx_status_t op_init(const zcx_provider_init_t* self, void** ctx) {
  return guarded("init", [&] {
    if (ctx == nullptr) return set_error(Status::kInvalidArg, kLog, "ucx init: NULL ctx");
    Ctx* c = nullptr;
    ZCX_TRY(ctx_create(self, &c));
    *ctx = c;
    return Status::kSuccess;
  });
}

zcx_status_t op_finalize(void* ctx) {
  if (ctx == nullptr) return ZCX_ERR_INVALID_ARG;
  return guarded("finalize", [&] {
    ctx_destroy(static_cast<Ctx*>(ctx));
    return Status::kSuccess;
  });
}

zcx_status_t op_devices(void* ctx, int* ndev) {
  if (ctx == nullptr || ndev == nullptr) return ZCX_ERR_INVALID_ARG;
  *ndev = static_cast<Ctx*>(ctx)->worker != nullptr ? 1 : 0;
  return ZCX_SUCCESS;
}

zcx_status_t op_get_properties(void* ctx, int dev, zcx_device_props_t* props) {
  return guarded("get_properties", [&] {
    ZCX_TRY(usable(static_cast<Ctx*>(ctx), dev));
    return get_properties(static_cast<Ctx*>(ctx), dev, props);
  });
}

zcx_status_t op_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return guarded("listen", [&] {
    Ctx* c = static_cast<Ctx*>(ctx);
    ZCX_TRY(usable(c, dev));
    if (handle == nullptr || listen_comm == nullptr)
      return set_error(Status::kInvalidArg, kLog, "ucx listen: NULL argument");
    std::lock_guard<std::recursive_mutex> lock(c->mu);
    ListenComm* lc = nullptr;
    ZCX_TRY(listen(c, handle, &lc));
    *listen_comm = lc;
    return Status::kSuccess;
  });
}

zcx_status_t op_connect(void* ctx, int dev, const void* handle, void** send_comm) {
  return guarded("connect", [&] {
    Ctx* c = static_cast<Ctx*>(ctx);
    ZCX_TRY(usable(c, dev));
    if (handle == nullptr || send_comm == nullptr)
      return set_error(Status::kInvalidArg, kLog, "ucx connect: NULL argument");
    *send_comm = nullptr;
    SendComm* sc = nullptr;
    ZCX_TRY(connect(c, handle, &sc));
    *send_comm = sc;
    return Status::kSuccess;
  });
}

zcx_status_t op_accept(void* listen_comm, void** recv_comm) {
  return guarded("accept", [&] {
    if (listen_comm == nullptr || recv_comm == nullptr)
      return set_error(Status::kInvalidArg, kLog, "ucx accept: NULL argument");
    *recv_comm = nullptr;
    RecvComm* rc = nullptr;
    ZCX_TRY(accept(static_cast<ListenComm*>(listen_comm), &rc));
    *recv_comm = rc;
    return Status::kSuccess;
  });
}

zcx_status_t op_peer_info(void* comm, zcx_peer_info_t* info) {
  if (comm == nullptr || info == nullptr) return ZCX_ERR_INVALID_ARG;
  auto* c = static_cast<CommBase*>(comm);
  std::lock_guard<std::recursive_mutex> lock(c->ctx->mu);
  // A half-open send comm learns its peer from the ack; until then rank is -1.
  if (c->handshake != nullptr && !c->failure.has()) {
    Status s = handshake_progress(c);
    if (failed(s)) c->failure.record(s, last_error());
  }
  *info = c->peer.info;
  return ZCX_SUCCESS;
}

zcx_status_t op_reg_mr(void* comm, void* data, size_t size, int kind, void** mhandle) {
  return guarded("reg_mr", [&] {
    if (comm == nullptr || mhandle == nullptr || size > kMaxMessageBytes)
      return set_error(Status::kInvalidArg, kLog, "ucx reg_mr: NULL argument or size overflow");
    Mr* mr = nullptr;
    ZCX_TRY(reg_mr(static_cast<CommBase*>(comm)->ctx, data, size, kind, &mr));
    *mhandle = mr;
    return Status::kSuccess;
  });
}

zcx_status_t op_dereg_mr(void* comm, void* mhandle) {
  if (comm == nullptr) return ZCX_ERR_INVALID_ARG;
  return guarded("dereg_mr", [&] { return dereg_mr(static_cast<Mr*>(mhandle)); });
}

zcx_status_t op_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                      void** request) {
  if (send_comm == nullptr || request == nullptr || (data == nullptr && size != 0) ||
      size > kMaxMessageBytes)
    return ZCX_ERR_INVALID_ARG;
  return guarded("isend", [&] {
    Request* r = nullptr;
    Status s = isend(static_cast<SendComm*>(send_comm), data, size, tag,
                     static_cast<Mr*>(mhandle), &r);
    *request = r;
    return s;
  });
}

zcx_status_t op_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                      void** mhandles, void** request) {
  if (recv_comm == nullptr || request == nullptr || data == nullptr || sizes == nullptr ||
      n < 1 || n > kMaxRecvs)
    return ZCX_ERR_INVALID_ARG;
  for (int i = 0; i < n; ++i)
    if ((data[i] == nullptr && sizes[i] != 0) || sizes[i] > kMaxMessageBytes)
      return ZCX_ERR_INVALID_ARG;
  return guarded("irecv", [&] {
    Request* r = nullptr;
    Status s = irecv(static_cast<RecvComm*>(recv_comm), n, data, sizes, tags,
                     reinterpret_cast<Mr**>(mhandles), &r);
    *request = r;
    return s;
  });
}

zcx_status_t op_test(void* request, int* done, size_t* sizes) {
  if (request == nullptr || done == nullptr) return ZCX_ERR_INVALID_ARG;
  return guarded("test", [&] { return test(static_cast<Request*>(request), done, sizes); });
}

zcx_status_t op_close(void* comm) {
  if (comm == nullptr) return ZCX_ERR_INVALID_ARG;
  return guarded("close", [&] {
    close_comm(static_cast<CommBase*>(comm));
    return Status::kSuccess;
  });
}

zcx_status_t op_close_listen(void* listen_comm) {
  if (listen_comm == nullptr) return ZCX_ERR_INVALID_ARG;
  return guarded("close_listen", [&] { return close_listen(static_cast<ListenComm*>(listen_comm)); });
}

const zcx_provider_ops_t kOps = {
    sizeof(zcx_provider_ops_t),
    ZCX_PROVIDER_ABI_VERSION,
    "ucx",
    ZCX_PROVIDER_ID_UCX,
    0,  // reaches remote hosts; registration optional (UCX registers unregistered memory)
    op_init,
    op_finalize,
    op_devices,
    op_get_properties,
    op_listen,
    op_connect,
    op_accept,
    op_peer_info,
    op_reg_mr,
    nullptr,  // reg_mr_dmabuf: UCP 1.13 has no dmabuf import
    op_dereg_mr,
    op_isend,
    op_irecv,
    nullptr,  // iflush: UCP completes a receive only after the data is in place
    op_test,
    op_close,
    op_close,
    op_close_listen,
    nullptr,  // connect_reverse: UCP endpoints are two-way already
    nullptr,  // accept_reverse
};

}  // namespace
}  // namespace zcx::ucx

extern "C" const zcx_provider_ops_t* zcx_provider_ucx(void) { return &zcx::ucx::kOps; }
