// The shm provider's ops table (transport/base/provider.h): C entry points that translate
// to the C++ implementation and never let an exception out.
#include "base/provider_entry.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config_vars.h"
#include "shm/shm.h"

#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <new>

namespace zcx::shm {
namespace {

// reg_mr hands out this marker: shm copies or uses CMA, so nothing needs registering.
int g_host_region_marker;

Status do_init(const zcx_provider_init_t* self, void** out) {
  ZCX_CHECK_ARG(self != nullptr && out != nullptr && self->size >= sizeof(zcx_provider_init_t),
                kLogShm, "shm init: bad arguments");
  auto* ctx = new (std::nothrow) Context;
  if (ctx == nullptr) return set_error(Status::kNoMemory, kLogShm, "shm init: out of memory");
  ctx->rank = self->rank;
  ctx->nranks = self->nranks;
  ctx->secret = self->secret;
  ctx->host.assign(self->host, strnlen(self->host, sizeof(self->host)));
  Status st = host_boot_id(ctx->boot_id);
  if (!ok(st)) {
    delete ctx;
    return st;
  }
  *out = ctx;
  return Status::kSuccess;
}

void fill_props(zcx_device_props_t* p) {
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "shm");
  p->speed_mbps = 200000;  // memory bandwidth class; measured figures in docs/PERFORMANCE.md
  p->latency_us = 0.1f;
  p->mem_kinds = ZCX_MEM_HOST;
  p->max_requests = kMaxRequests;
  p->max_recvs = kMaxRecvs;
  p->max_comms = 65536;
  p->inline_bytes = cfg_slot_bytes() - kSlotHeaderBytes;
  p->max_message = kMaxMessage;
  p->reg_is_global = 1;
  p->needs_flush = 0;
}

// A CMA receive advertised our buffer: the sender may still be writing into it with
// process_vm_writev. Before the buffer can be freed, wait (bounded by ZCX_TIMEOUT) until the
// sender has finished its part or has died.
void wait_cma_writer(Comm* c) {
  uint64_t advertised = c->rline->rdv_seq.load(std::memory_order_acquire);
  if (advertised == 0) return;
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  while (c->sline->cma_part_done.load(std::memory_order_acquire) < advertised) {
    if (dl.expired() || !c->watch.alive() || c->sline->closed.load() != 0) return;
    sched_yield();
  }
}

zcx_status_t c_init(const zcx_provider_init_t* self, void** ctx) {
  return to_c(do_init(self, ctx));
}
zcx_status_t c_devices(void* ctx, int* ndev) {
  if (ctx == nullptr || ndev == nullptr) return ZCX_ERR_INVALID_ARG;
  *ndev = 1;
  return ZCX_SUCCESS;
}
zcx_status_t c_get_properties(void* ctx, int dev, zcx_device_props_t* props) {
  if (ctx == nullptr || dev != 0 || props == nullptr) return ZCX_ERR_INVALID_ARG;
  fill_props(props);
  return ZCX_SUCCESS;
}
zcx_status_t c_listen(void* ctx, int dev, void* handle, void** lc) {
  if (ctx == nullptr || dev != 0 || handle == nullptr || lc == nullptr)
    return ZCX_ERR_INVALID_ARG;
  return hand_out<ListenComm>(lc, [&](ListenComm** out) {
    return listen(static_cast<Context*>(ctx), handle, out);
  });
}
zcx_status_t c_connect(void* ctx, int dev, const void* handle, void** sc) {
  if (ctx == nullptr || dev != 0 || handle == nullptr || sc == nullptr)
    return ZCX_ERR_INVALID_ARG;
  return hand_out<Comm>(sc, [&](Comm** out) {
    return connect(static_cast<Context*>(ctx), handle, out);
  });
}
zcx_status_t c_accept(void* lc, void** rc) {
  if (lc == nullptr || rc == nullptr) return ZCX_ERR_INVALID_ARG;
  return hand_out<Comm>(rc, [&](Comm** out) { return accept(static_cast<ListenComm*>(lc), out); });
}
zcx_status_t c_reg_mr(void* comm, void* data, size_t size, int kind, void** mh) {
  if (comm == nullptr || mh == nullptr || (data == nullptr && size != 0))
    return ZCX_ERR_INVALID_ARG;
  if (size > kMaxMessage)
    return to_c(set_error(Status::kInvalidArg, kLogShm,
                          "shm reg_mr: %zu bytes exceeds the %zu-byte limit", size, kMaxMessage));
  if (kind != ZCX_MEM_HOST)
    return to_c(set_error(Status::kUnsupported, kLogShm, "shm moves host memory only"));
  *mh = &g_host_region_marker;
  return ZCX_SUCCESS;
}
zcx_status_t c_isend(void* sc, void* data, size_t size, int tag, void*, void** req) {
  if (sc == nullptr || req == nullptr || (data == nullptr && size != 0))
    return ZCX_ERR_INVALID_ARG;
  if (size > kMaxMessage)
    return to_c(set_error(Status::kInvalidArg, kLogShm,
                          "shm isend: %zu bytes exceeds the %zu-byte message limit", size,
                          kMaxMessage));
  return hand_out<Request>(req, [&](Request** out) {
    return isend(static_cast<Comm*>(sc), data, size, tag, out);
  });
}
zcx_status_t c_irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void**,
                     void** req) {
  if (rc == nullptr || req == nullptr || data == nullptr || sizes == nullptr)
    return ZCX_ERR_INVALID_ARG;
  return hand_out<Request>(req, [&](Request** out) {
    return irecv(static_cast<Comm*>(rc), n, data, sizes, tags, out);
  });
}
zcx_status_t c_test(void* req, int* done, size_t* sizes) {
  if (req == nullptr || done == nullptr) return ZCX_ERR_INVALID_ARG;
  return to_c(test(static_cast<Request*>(req), done, sizes));
}
zcx_status_t c_close_send(void* sc) {
  auto* c = static_cast<Comm*>(sc);
  if (c != nullptr && c->sline != nullptr) c->sline->closed.store(1, std::memory_order_release);
  return delete_as<Comm>(c);
}
zcx_status_t c_close_recv(void* rc) {
  auto* c = static_cast<Comm*>(rc);
  if (c != nullptr && c->rline != nullptr) {
    c->rline->closed.store(1, std::memory_order_release);
    wait_cma_writer(c);
  }
  return delete_as<Comm>(c);
}

const zcx_provider_ops_t kOps = {
    sizeof(zcx_provider_ops_t), ZCX_PROVIDER_ABI_VERSION, "shm", ZCX_PROVIDER_ID_SHM,
    ZCX_PROVIDER_LOCAL_ONLY, c_init, delete_as<Context>, c_devices, c_get_properties, c_listen,
    c_connect, c_accept, peer_info_of<Comm>, c_reg_mr, nullptr, dereg_marker, c_isend, c_irecv,
    nullptr, c_test, c_close_send, c_close_recv, delete_as<ListenComm>, nullptr, nullptr,
};

}  // namespace
}  // namespace zcx::shm

extern "C" __attribute__((visibility("default"))) const zcx_provider_ops_t* zcx_provider_shm(
    void) {
  return &zcx::shm::kOps;
}
