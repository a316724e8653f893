// The ib provider's ops table (transport/base/provider.h).
#include "ib/ib.h"

#include "common/log.h"

#include <cstring>

namespace zcx::ib {
namespace {

zcx_status_t init(const zcx_provider_init_t* self, void** vctx) {
  if (self == nullptr || vctx == nullptr || self->size < sizeof(zcx_provider_init_t))
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: init: bad arguments"));
  auto ctx = std::make_unique<Ctx>();
  ctx->self = *self;
  ZCX_IB_TRY_C(devices_acquire(&ctx->devs));
  *vctx = ctx.release();
  return ZCX_SUCCESS;
}

zcx_status_t finalize(void* vctx) {
  auto* ctx = static_cast<Ctx*>(vctx);
  if (ctx == nullptr) return ZCX_SUCCESS;
  pending_connects_clear(ctx);
  delete ctx;
  devices_release();
  return ZCX_SUCCESS;
}

zcx_status_t devices(void* vctx, int* ndev) {
  auto* ctx = static_cast<Ctx*>(vctx);
  if (ctx == nullptr || ndev == nullptr)
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: devices: bad arguments"));
  *ndev = static_cast<int>(ctx->devs.size());
  return ZCX_SUCCESS;
}

zcx_status_t get_properties(void* vctx, int dev, zcx_device_props_t* p) {
  auto* ctx = static_cast<Ctx*>(vctx);
  if (ctx == nullptr || p == nullptr || dev < 0 || dev >= static_cast<int>(ctx->devs.size()))
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: no device %d", dev));
  const Device* d = ctx->devs[dev];
  *p = zcx_device_props_t{};
  snprintf(p->name, sizeof p->name, "%s:%d", d->name.c_str(), d->port);
  snprintf(p->pci_path, sizeof p->pci_path, "%s", d->pci_path.c_str());
  p->guid = d->guid;
  p->speed_mbps = d->speed_mbps;
  p->latency_us = 0;
  p->port = d->port;
  p->mem_kinds = d->mem_kinds;
  p->max_requests = kSlots;
  p->max_recvs = kMaxRecvs;
  p->max_comms = d->max_qp > 0 ? d->max_qp : 65536;
  p->inline_bytes = params::inline_bytes.get();
  p->max_message = kMaxMessage;
  p->reg_is_global = 1;
  // A NIC's writes into GPU memory may land after their completion: receives there want
  // iflush (as NCCL's ib transport does). Host memory never does.
  p->needs_flush = (d->mem_kinds & ZCX_MEM_CUDA) != 0;
  return ZCX_SUCCESS;
}

zcx_status_t peer_info(void* vcomm, zcx_peer_info_t* info) {
  auto* c = static_cast<Comm*>(vcomm);
  if (c == nullptr || info == nullptr)
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: peer_info: bad arguments"));
  *info = c->peer;
  return ZCX_SUCCESS;
}

zcx_status_t reg_mr(void* vcomm, void* data, size_t size, int kind, void** mhandle) {
  auto* c = static_cast<Comm*>(vcomm);
  if (c == nullptr || mhandle == nullptr)
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: reg_mr: bad arguments"));
  if ((kind & c->dev->mem_kinds) == 0 || (kind != ZCX_MEM_HOST && kind != ZCX_MEM_CUDA))
    return to_c(set_error(Status::kUnsupported, kLog,
                          "ib: %s cannot register memory kind %d (supported mask 0x%x; GPU "
                          "memory needs nvidia_peermem or dmabuf)",
                          c->dev->name.c_str(), kind, c->dev->mem_kinds));
  if (size == 0) {  // nothing to register: size-0 transfers need no key
    *mhandle = nullptr;
    return ZCX_SUCCESS;
  }
  MrEntry* e = nullptr;
  ZCX_IB_TRY_C(mr_register(c->dev, data, size, kind, &e));
  *mhandle = e;
  return ZCX_SUCCESS;
}

zcx_status_t reg_mr_dmabuf(void* vcomm, void* data, size_t size, int kind, uint64_t offset,
                           int fd, void** mhandle) {
  auto* c = static_cast<Comm*>(vcomm);
  if (c == nullptr || mhandle == nullptr)
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: reg_mr_dmabuf: bad arguments"));
  MrEntry* e = nullptr;
  ZCX_IB_TRY_C(mr_register_dmabuf(c->dev, data, size, kind, offset, fd, &e));
  *mhandle = e;
  return ZCX_SUCCESS;
}

zcx_status_t dereg_mr(void*, void* mhandle) {
  mr_release(static_cast<MrEntry*>(mhandle));  // NULL is a no-op
  return ZCX_SUCCESS;
}

zcx_status_t close_send(void* c) {
  delete static_cast<SendComm*>(c);
  return ZCX_SUCCESS;
}
zcx_status_t close_recv(void* c) {
  delete static_cast<RecvComm*>(c);
  return ZCX_SUCCESS;
}
zcx_status_t close_listen(void* c) {
  delete static_cast<ListenComm*>(c);
  return ZCX_SUCCESS;
}

const zcx_provider_ops_t kOps = {
    sizeof(zcx_provider_ops_t), ZCX_PROVIDER_ABI_VERSION, "ib", ZCX_PROVIDER_ID_IB,
    ZCX_PROVIDER_NEEDS_REG, init, finalize, devices, get_properties, listen, connect, accept,
    peer_info, reg_mr, reg_mr_dmabuf, dereg_mr, isend, irecv, iflush, test,
    close_send, close_recv, close_listen, nullptr, nullptr,
};

}  // namespace
}  // namespace zcx::ib

extern "C" __attribute__((visibility("default"))) const zcx_provider_ops_t* zcx_provider_ib(void) {
  return &zcx::ib::kOps;
}
