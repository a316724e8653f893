#include "api.h"

#include "base/handle.h"
#include "comm.h"
#include "common/check.h"
#include "log_bridge.h"
#include "plugin_state.h"

#include <climits>
#include <cstring>
#include <exception>
#include <memory>
#include <new>

namespace zcx::plugin {
namespace {

ncclResult_t to_nccl(Status s) {
  switch (s) {
    case Status::kSuccess:
    case Status::kInProgress: return ncclSuccess;
    case Status::kInvalidArg: return ncclInvalidArgument;
    case Status::kInvalidUsage:
    case Status::kAuth:
    case Status::kMismatch: return ncclInvalidUsage;  // configuration differs between peers
    case Status::kNoMemory:
    case Status::kNoDevice:
    case Status::kSystem: return ncclSystemError;
    case Status::kRemote:
    case Status::kTimeout:
    case Status::kProtocol: return ncclRemoteError;
    default: return ncclInternalError;
  }
}

// The firewall: nothing thrown inside zcx reaches NCCL.
template <typename Body>
ncclResult_t guard(const char* what, Body&& body) noexcept {
  try {
    return to_nccl(body());
  } catch (const std::bad_alloc&) {
    ZCX_WARN(kLogPlugin, "%s: out of memory", what);
    return ncclSystemError;
  } catch (const std::exception& e) {
    ZCX_WARN(kLogPlugin, "%s: internal error: %s", what, e.what());
    return ncclInternalError;
  } catch (...) {
    ZCX_WARN(kLogPlugin, "%s: internal error (unknown exception)", what);
    return ncclInternalError;
  }
}

Status checked_ctx(void* ctx, Ctx** out) {
  auto* c = static_cast<Ctx*>(ctx);
  if (c == nullptr || c->magic != kCtxMagic)
    return set_error(Status::kInternal, kLogPlugin, "ctx %p is not a zcx plugin context", ctx);
  if (ProcessState::get().ops() == nullptr)
    return set_error(Status::kInvalidUsage, kLogPlugin, "plugin used after its last finalize");
  *out = c;
  return Status::kSuccess;
}

Status checked_comm(void* comm, Comm** out) {
  auto* c = static_cast<Comm*>(comm);
  if (c == nullptr || c->magic != kCommMagic)
    return set_error(Status::kInternal, kLogPlugin, "comm %p is not a zcx send/recv comm", comm);
  *out = c;
  return Status::kSuccess;
}

Status checked_dev(int dev) {
  int n = ProcessState::get().ndev();
  if (dev < 0 || dev >= n)
    return set_error(Status::kInvalidArg, kLogPlugin, "device %d out of range (0..%d)", dev, n - 1);
  return Status::kSuccess;
}

// A handle from the peer: reject garbage and handles of another plugin/provider up front,
// with a message that names the likely misconfiguration.
Status check_handle(const void* handle, const zcx_provider_ops_t* ops) {
  if (handle == nullptr) return set_error(Status::kInvalidArg, kLogPlugin, "connect handle is NULL");
  uint32_t magic;
  memcpy(&magic, handle, sizeof magic);
  const auto* bytes = static_cast<const uint8_t*>(handle);
  if (magic != kHandleMagic)
    return set_error(Status::kInvalidUsage, kLogPlugin,
                     "connect handle is not a zcx handle (magic 0x%08x): the peer uses another "
                     "net plugin or version; check NCCL_NET_PLUGIN on every node", magic);
  if (bytes[4] != kHandleVersion || bytes[5] != ops->id)
    return set_error(Status::kMismatch, kLogPlugin,
                     "connect handle has version %u, provider id %u; this process uses "
                     "version %u, provider %s (id %u): set the same ZCX_NET_PROVIDER and zcx "
                     "version on every node", bytes[4], bytes[5], kHandleVersion, ops->name, ops->id);
  return Status::kSuccess;
}

Status provider(zcx_status_t s) { return static_cast<Status>(s); }

std::mutex g_legacy_mu;
bool g_legacy_ready = false;
Ctx g_legacy_ctx;

}  // namespace

ncclResult_t api_init(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger) {
  return guard("init", [&] {
    log_bridge_attach(logger);
    ZCX_CHECK_ARG(ctx != nullptr, kLogPlugin, "init: ctx is NULL");
    *ctx = nullptr;
    auto c = std::make_unique<Ctx>();
    c->comm_id = comm_id;
    c->traffic_class = traffic_class;
    ZCX_TRY(ProcessState::get().acquire());
    *ctx = c.release();
    return Status::kSuccess;
  });
}

ncclResult_t api_finalize(void* ctx) {
  return guard("finalize", [&] {
    Ctx* c = nullptr;
    ZCX_TRY(checked_ctx(ctx, &c));
    c->magic = 0;
    delete c;
    ProcessState::get().release();
    return Status::kSuccess;
  });
}

ncclResult_t api_legacy_init(ncclDebugLogger_t logger) {
  return guard("init", [&] {
    log_bridge_attach(logger);
    std::lock_guard<std::mutex> lock(g_legacy_mu);
    if (g_legacy_ready) return Status::kSuccess;
    ZCX_TRY(ProcessState::get().acquire());  // released when the library is unloaded
    g_legacy_ready = true;
    return Status::kSuccess;
  });
}

void* api_legacy_ctx() { return &g_legacy_ctx; }

ncclResult_t api_devices(int* ndev) {
  return guard("devices", [&] {
    ZCX_CHECK_ARG(ndev != nullptr, kLogPlugin, "devices: ndev is NULL");
    if (ProcessState::get().ops() == nullptr)
      return set_error(Status::kInvalidUsage, kLogPlugin, "devices called before init");
    *ndev = ProcessState::get().ndev();
    return Status::kSuccess;
  });
}

ncclResult_t api_get_properties(int dev, NeutralProps* props) {
  return guard("getProperties", [&] { return ProcessState::get().properties(dev, props); });
}

ncclResult_t api_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return guard("listen", [&] {
    Ctx* c = nullptr;
    ZCX_TRY(checked_ctx(ctx, &c));
    ZCX_TRY(checked_dev(dev));
    ZCX_CHECK_ARG(handle != nullptr && listen_comm != nullptr, kLogPlugin, "listen: NULL argument");
    *listen_comm = nullptr;
    const zcx_provider_ops_t* ops = ProcessState::get().ops();
    auto l = std::make_unique<ListenComm>();
    l->ops = ops;
    l->dev = dev;
    memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
    ZCX_TRY(provider(ops->listen(ProcessState::get().provider_ctx(), dev, handle, &l->plisten)));
    *listen_comm = l.release();
    return Status::kSuccess;
  });
}

ncclResult_t api_connect(void* ctx, int dev, void* handle, void** send_comm) {
  return guard("connect", [&] {
    Ctx* c = nullptr;
    ZCX_TRY(checked_ctx(ctx, &c));
    ZCX_TRY(checked_dev(dev));
    ZCX_CHECK_ARG(send_comm != nullptr, kLogPlugin, "connect: sendComm is NULL");
    *send_comm = nullptr;
    const zcx_provider_ops_t* ops = ProcessState::get().ops();
    ZCX_TRY(check_handle(handle, ops));
    void* pcomm = nullptr;
    ZCX_TRY(provider(ops->connect(ProcessState::get().provider_ctx(), dev, handle, &pcomm)));
    if (pcomm == nullptr) return Status::kSuccess;  // not yet: NCCL calls again
    auto comm = std::make_unique<Comm>();
    comm->is_send = true;
    comm->ops = ops;
    comm->pcomm = pcomm;
    *send_comm = comm.release();
    return Status::kSuccess;
  });
}

ncclResult_t api_accept(void* listen_comm, void** recv_comm) {
  return guard("accept", [&] {
    auto* l = static_cast<ListenComm*>(listen_comm);
    if (l == nullptr || l->magic != kListenMagic)
      return set_error(Status::kInternal, kLogPlugin, "accept: %p is not a listen comm", listen_comm);
    ZCX_CHECK_ARG(recv_comm != nullptr, kLogPlugin, "accept: recvComm is NULL");
    *recv_comm = nullptr;
    void* pcomm = nullptr;
    ZCX_TRY(provider(l->ops->accept(l->plisten, &pcomm)));
    if (pcomm == nullptr) return Status::kSuccess;
    auto comm = std::make_unique<Comm>();
    comm->is_send = false;
    comm->ops = l->ops;
    comm->pcomm = pcomm;
    *recv_comm = comm.release();
    return Status::kSuccess;
  });
}

ncclResult_t api_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guard("regMr", [&] {
    Comm* c = nullptr;
    ZCX_TRY(checked_comm(comm, &c));
    ZCX_CHECK_ARG(mhandle != nullptr, kLogPlugin, "regMr: mhandle is NULL");
    ZCX_CHECK_ARG(type == NCCL_PTR_HOST || type == NCCL_PTR_CUDA, kLogPlugin,
                  "regMr of %zu bytes at %p: unknown memory type %d", size, data, type);
    std::lock_guard<std::mutex> lock(c->mu);
    return provider(c->ops->reg_mr(c->pcomm, data, size, type, mhandle));
  });
}

ncclResult_t api_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle) {
  return guard("regMrDmaBuf", [&] {
    Comm* c = nullptr;
    ZCX_TRY(checked_comm(comm, &c));
    ZCX_CHECK_ARG(mhandle != nullptr, kLogPlugin, "regMrDmaBuf: mhandle is NULL");
    if (c->ops->reg_mr_dmabuf == nullptr)
      return set_error(Status::kUnsupported, kLogPlugin,
                       "regMrDmaBuf of %zu bytes at %p (fd %d): provider %s has no dmabuf "
                       "registration and does not advertise NCCL_PTR_DMABUF", size, data, fd,
                       c->ops->name);
    // NCCL closes fd as soon as we return: the provider completes the registration here.
    std::lock_guard<std::mutex> lock(c->mu);
    return provider(c->ops->reg_mr_dmabuf(c->pcomm, data, size, type, offset, fd, mhandle));
  });
}

ncclResult_t api_dereg_mr(void* comm, void* mhandle) {
  return guard("deregMr", [&] {
    Comm* c = nullptr;
    ZCX_TRY(checked_comm(comm, &c));
    if (mhandle == nullptr) return Status::kSuccess;
    std::lock_guard<std::mutex> lock(c->mu);
    return provider(c->ops->dereg_mr(c->pcomm, mhandle));
  });
}

ncclResult_t api_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                       void** request) {
  return guard("isend", [&] {
    Comm* c = nullptr;
    ZCX_TRY(checked_comm(send_comm, &c));
    ZCX_CHECK_ARG(c->is_send && request != nullptr, kLogPlugin, "isend: not a send comm or NULL request");
    *request = nullptr;
    std::lock_guard<std::mutex> lock(c->mu);
    Request* r = c->take_request(RequestKind::kSend, 1);
    Status s = provider(c->ops->isend(c->pcomm, data, size, tag, mhandle, &r->preq));
    if (failed(s) || r->preq == nullptr) {  // error, or "retry later" (NULL request)
      c->give_request(r);
      return failed(s) ? s : Status::kSuccess;
    }
    *request = r;
    return Status::kSuccess;
  });
}

// *request may hold NCCL_NET_OPTIONAL_RECV_COMPLETION on entry (LL/LL128): NCCL tolerates an
// early or cheap completion then, but still needs a real request, which we always return.
ncclResult_t api_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                       void** mhandles, void** request) {
  return guard("irecv", [&] {
    Comm* c = nullptr;
    ZCX_TRY(checked_comm(recv_comm, &c));
    ZCX_CHECK_ARG(!c->is_send && request != nullptr, kLogPlugin, "irecv: not a recv comm or NULL request");
    ZCX_CHECK_ARG(n >= 1 && n <= kMaxRecvsCap && data != nullptr && sizes != nullptr, kLogPlugin,
                  "irecv: n=%d buffers (1..%d) or NULL arrays", n, kMaxRecvsCap);
    *request = nullptr;
    size_t posted[kMaxRecvsCap];
    for (int i = 0; i < n; ++i) posted[i] = sizes[i];
    std::lock_guard<std::mutex> lock(c->mu);
    Request* r = c->take_request(RequestKind::kRecv, n);
    Status s = provider(c->ops->irecv(c->pcomm, n, data, posted, tags, mhandles, &r->preq));
    if (failed(s) || r->preq == nullptr) {
      c->give_request(r);
      return failed(s) ? s : Status::kSuccess;
    }
    *request = r;
    return Status::kSuccess;
  });
}

// A NULL request means "nothing to flush" (host memory, or a provider without GPU flush).
ncclResult_t api_iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                        void** request) {
  return guard("iflush", [&] {
    Comm* c = nullptr;
    ZCX_TRY(checked_comm(recv_comm, &c));
    ZCX_CHECK_ARG(request != nullptr && n >= 0 && n <= kMaxRecvsCap, kLogPlugin,
                  "iflush: n=%d or NULL request", n);
    *request = nullptr;
    if (c->ops->iflush == nullptr || n == 0) return Status::kSuccess;
    size_t bytes[kMaxRecvsCap];
    for (int i = 0; i < n; ++i) bytes[i] = sizes != nullptr && sizes[i] > 0 ? static_cast<size_t>(sizes[i]) : 0;
    std::lock_guard<std::mutex> lock(c->mu);
    Request* r = c->take_request(RequestKind::kFlush, n);
    Status s = provider(c->ops->iflush(c->pcomm, n, data, bytes, mhandles, &r->preq));
    if (failed(s) || r->preq == nullptr) {
      c->give_request(r);
      return failed(s) ? s : Status::kSuccess;
    }
    *request = r;
    return Status::kSuccess;
  });
}

ncclResult_t api_test(void* request, int* done, int* sizes) {
  return guard("test", [&] {
    auto* r = static_cast<Request*>(request);
    if (r == nullptr || r->magic != kRequestMagic)
      return set_error(Status::kInternal, kLogPlugin, "test: %p is not a live zcx request "
                       "(already completed or its comm closed)", request);
    ZCX_CHECK_ARG(done != nullptr, kLogPlugin, "test: done is NULL");
    Comm* c = r->comm;
    size_t got[kMaxRecvsCap] = {};
    std::lock_guard<std::mutex> lock(c->mu);
    *done = 0;
    Status s = provider(c->ops->test(r->preq, done, got));
    if (failed(s)) {
      c->give_request(r);  // the provider has retired it
      return s;
    }
    if (*done == 0) return Status::kSuccess;
    if (sizes != nullptr && r->kind != RequestKind::kFlush)
      for (int i = 0; i < r->n; ++i) sizes[i] = got[i] > INT_MAX ? INT_MAX : static_cast<int>(got[i]);
    c->give_request(r);
    return Status::kSuccess;
  });
}

namespace {
Status close_comm(void* comm, bool is_send) {
  Comm* c = nullptr;
  ZCX_TRY(checked_comm(comm, &c));
  if (c->is_send != is_send)
    return set_error(Status::kInternal, kLogPlugin, "close%s on a %s comm", is_send ? "Send" : "Recv",
                     c->is_send ? "send" : "recv");
  Status s;
  {
    std::lock_guard<std::mutex> lock(c->mu);  // requests in flight are dropped by the provider
    s = provider(is_send ? c->ops->close_send(c->pcomm) : c->ops->close_recv(c->pcomm));
  }
  c->magic = 0;
  delete c;
  return s;
}
}  // namespace

ncclResult_t api_close_send(void* send_comm) {
  return guard("closeSend", [&] { return close_comm(send_comm, true); });
}

ncclResult_t api_close_recv(void* recv_comm) {
  return guard("closeRecv", [&] { return close_comm(recv_comm, false); });
}

ncclResult_t api_close_listen(void* listen_comm) {
  return guard("closeListen", [&] {
    auto* l = static_cast<ListenComm*>(listen_comm);
    if (l == nullptr || l->magic != kListenMagic)
      return set_error(Status::kInternal, kLogPlugin, "closeListen: %p is not a listen comm", listen_comm);
    Status s = provider(l->ops->close_listen(l->plisten));
    l->magic = 0;
    delete l;
    return s;
  });
}

}  // namespace zcx::plugin
