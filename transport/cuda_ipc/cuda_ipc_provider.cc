// The cuda_ipc provider's ops table (transport/base/provider.h): C entry points that
// translate to the C++ implementation and never let an exception out.
#include "base/provider_entry.h"
#include "common/check.h"
#include "cuda_ipc/cuda_ipc.h"

#include <cstring>
#include <new>

namespace zcx::cuda_ipc {
namespace {

// reg_mr hands out this marker: receive buffers are exported per irecv (the import side
// caches), so registration has nothing to keep.
int g_cuda_region_marker;

Status do_init(const zcx_provider_init_t* self, void** out) {
  ZCX_CHECK_ARG(self != nullptr && out != nullptr && self->size >= sizeof(zcx_provider_init_t),
                kLogCuda, "cuda_ipc init: bad arguments");
  auto* ctx = new (std::nothrow) Context;
  if (ctx == nullptr) return set_error(Status::kNoMemory, kLogCuda, "cuda_ipc init: no memory");
  ctx->rank = self->rank;
  ctx->nranks = self->nranks;
  ctx->secret = self->secret;
  ctx->host.assign(self->host, strnlen(self->host, sizeof(self->host)));
  Status st = context_open(ctx);
  if (!ok(st)) {
    delete ctx;
    return st;
  }
  *out = ctx;
  return Status::kSuccess;
}

Context* ctx_of(void* ctx, int dev) {
  auto* c = static_cast<Context*>(ctx);
  return c != nullptr && dev >= 0 && dev < c->ndev ? c : nullptr;
}

zcx_status_t c_init(const zcx_provider_init_t* self, void** ctx) {
  return to_c(do_init(self, ctx));
}
zcx_status_t c_devices(void* ctx, int* ndev) {
  if (ctx == nullptr || ndev == nullptr) return ZCX_ERR_INVALID_ARG;
  *ndev = static_cast<Context*>(ctx)->ndev;
  return ZCX_SUCCESS;
}
zcx_status_t c_get_properties(void* ctx, int dev, zcx_device_props_t* props) {
  if (ctx == nullptr || props == nullptr) return ZCX_ERR_INVALID_ARG;
  return to_c(fill_props(static_cast<Context*>(ctx), dev, props));
}
zcx_status_t c_listen(void* ctx, int dev, void* handle, void** lc) {
  Context* c = ctx_of(ctx, dev);
  if (c == nullptr || handle == nullptr || lc == nullptr) return ZCX_ERR_INVALID_ARG;
  return hand_out<ListenComm>(lc, [&](ListenComm** out) { return listen(c, dev, handle, out); });
}
zcx_status_t c_connect(void* ctx, int dev, const void* handle, void** sc) {
  Context* c = ctx_of(ctx, dev);
  if (c == nullptr || handle == nullptr || sc == nullptr) return ZCX_ERR_INVALID_ARG;
  return hand_out<Comm>(sc, [&](Comm** out) { return connect(c, dev, handle, out); });
}
zcx_status_t c_accept(void* lc, void** rc) {
  if (lc == nullptr || rc == nullptr) return ZCX_ERR_INVALID_ARG;
  return hand_out<Comm>(rc, [&](Comm** out) { return accept(static_cast<ListenComm*>(lc), out); });
}
zcx_status_t c_reg_mr(void* comm, void* data, size_t size, int kind, void** mh) {
  if (comm == nullptr || mh == nullptr || (data == nullptr && size != 0))
    return ZCX_ERR_INVALID_ARG;
  if (kind != ZCX_MEM_CUDA)
    return to_c(set_error(Status::kUnsupported, kLogCuda, "cuda_ipc moves CUDA memory only"));
  *mh = &g_cuda_region_marker;
  return ZCX_SUCCESS;
}
zcx_status_t c_isend(void* sc, void* data, size_t size, int, void*, void** req) {
  if (sc == nullptr || req == nullptr || (data == nullptr && size != 0))
    return ZCX_ERR_INVALID_ARG;
  if (size > kMaxMessage)
    return to_c(set_error(Status::kInvalidArg, kLogCuda,
                          "cuda_ipc isend: %zu bytes exceeds the %zu-byte message limit", size,
                          kMaxMessage));
  return hand_out<Request>(req, [&](Request** out) {
    return isend(static_cast<Comm*>(sc), data, size, out);
  });
}
zcx_status_t c_irecv(void* rc, int n, void** data, size_t* sizes, int*, void**, void** req) {
  if (rc == nullptr || req == nullptr || data == nullptr || sizes == nullptr)
    return ZCX_ERR_INVALID_ARG;
  if (n != 1)
    return to_c(set_error(Status::kUnsupported, kLogCuda,
                          "cuda_ipc irecv: %d buffers; grouped receives are not supported "
                          "(max_recvs is 1)", n));
  return hand_out<Request>(req, [&](Request** out) {
    return irecv(static_cast<Comm*>(rc), data[0], sizes[0], out);
  });
}
zcx_status_t c_test(void* req, int* done, size_t* sizes) {
  if (req == nullptr || done == nullptr) return ZCX_ERR_INVALID_ARG;
  return to_c(test(static_cast<Request*>(req), done, sizes));
}

const zcx_provider_ops_t kOps = {
    sizeof(zcx_provider_ops_t), ZCX_PROVIDER_ABI_VERSION, "cuda_ipc", ZCX_PROVIDER_ID_CUDA_IPC,
    ZCX_PROVIDER_LOCAL_ONLY | ZCX_PROVIDER_DEVICE_ONLY, c_init, delete_as<Context>, c_devices,
    c_get_properties, c_listen, c_connect, c_accept, peer_info_of<Comm>, c_reg_mr, nullptr,
    dereg_marker, c_isend, c_irecv, nullptr, c_test, delete_as<Comm>, delete_as<Comm>,
    delete_as<ListenComm>, nullptr, nullptr,
};

}  // namespace
}  // namespace zcx::cuda_ipc

extern "C" __attribute__((visibility("default"))) const zcx_provider_ops_t*
zcx_provider_cuda_ipc(void) {
  return &zcx::cuda_ipc::kOps;
}
