// Public C API of the collectives (coll.h): argument checks, handles, groups. No exception
// leaves this file (allocation failures become ZCX_ERR_NO_MEMORY).
#include "algorithms/algorithms.h"
#include "base/api_internal.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config_vars.h"
#include "core/api_handles.h"
#include "core/comm.h"

#include <zcx/coll.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace zcx::coll {
namespace {

// Communicator handles are in the API's handle registry (handle_live) while they may be
// used. A call checks its handle and counts itself in under this lock, and zcx_comm_abort
// and _destroy take the handle out under it, so an abort from another thread never frees a
// communicator that a call is about to enter.
std::mutex g_comms_mu;

// One API call on a communicator (see g_comms_mu). Refused, with the reason, when the
// handle is unknown (NULL, destroyed, aborted) or an abort has begun.
class CallScope {
 public:
  explicit CallScope(zcx_comm* c) {
    std::lock_guard<std::mutex> lock(g_comms_mu);
    if (c == nullptr || !handle_live(c)) {  // membership first: c may be freed
      st_ = set_error(Status::kInvalidArg, kLogColl,
                      "not a live communicator (NULL, destroyed or aborted)");
    } else if (c->aborting.load()) {
      st_ = set_error(Status::kAborted, kLogColl, "the communicator is being aborted");
    } else {
      c_ = c;
      c_->calls.fetch_add(1);
    }
  }
  ~CallScope() {
    if (c_) c_->calls.fetch_sub(1);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  Status status() const { return st_; }

 private:
  zcx_comm* c_ = nullptr;
  Status st_ = Status::kSuccess;
};

// Calls between zcx_group_start and the outermost zcx_group_end, per thread.
struct GroupState {
  int depth = 0;
  zcx_comm* comm = nullptr;
  std::vector<OpArgs> calls;
  Status error = Status::kSuccess;
};
thread_local GroupState t_group;

template <class F>
zcx_status_t guarded(F&& f) {
  try {
    return to_c(f());
  } catch (const std::bad_alloc&) {
    return to_c(set_error(Status::kNoMemory, kLogColl, "out of memory in a collective call"));
  } catch (...) {
    return to_c(set_error(Status::kInternal, kLogColl, "unexpected exception in a collective call"));
  }
}

Status check_comm(zcx_comm* c) {
  ZCX_CHECK_ARG(c != nullptr && c->comm != nullptr, kLogColl, "NULL communicator");
  return Status::kSuccess;
}

// Before a host-side use of the communicator: no asynchronous stream-ordered call in flight
// (its progress thread drives the communicator meanwhile). Its failure, if any, is returned.
Status host_turn(zcx_comm* c) { return c->gpu ? c->gpu->quiesce() : Status::kSuccess; }

Status check_args(zcx_comm* c, const OpArgs& a) {
  ZCX_TRY(check_comm(c));
  size_t es = dtype_bytes(a.dtype);
  ZCX_CHECK_ARG(es != 0, kLogColl, "invalid dtype %d", static_cast<int>(a.dtype));
  ZCX_CHECK_ARG(a.op >= 0 && a.op < ZCX_REDOP_COUNT, kLogColl, "invalid reduction op %d",
                static_cast<int>(a.op));
  const size_t n = static_cast<size_t>(c->comm->nranks());
  size_t total;  // count * esize * nranks must fit a size_t (multiplications, not divisions)
  ZCX_CHECK_ARG(!__builtin_mul_overflow(a.count, es * n, &total), kLogColl,
                "count %zu overflows a byte size", a.count);
  bool rooted = a.kind == CollKind::kBroadcast || a.kind == CollKind::kReduce ||
                a.kind == CollKind::kSendRecv;
  ZCX_CHECK_ARG(!rooted || (a.root >= 0 && a.root < static_cast<int>(n)), kLogColl,
                "%s: root/peer %d outside 0..%zu", coll_kind_name(a.kind), a.root, n - 1);
  if (a.count == 0 || a.kind == CollKind::kSendRecv) return Status::kSuccess;
  const bool is_root = a.root == c->comm->rank();
  ZCX_CHECK_ARG(a.recvbuf || (a.kind == CollKind::kReduce && !is_root), kLogColl,
                "%s: NULL recvbuf", coll_kind_name(a.kind));
  ZCX_CHECK_ARG(a.sendbuf || (a.kind == CollKind::kBroadcast && !is_root), kLogColl,
                "%s: NULL sendbuf", coll_kind_name(a.kind));
  return Status::kSuccess;
}

// A call with a CUDA stream (gpu_runner.h): device buffers, ordered after the stream's
// earlier work; queued (asynchronous) or complete when it returns (ZCX_GPU_ASYNC=0).
Status post_stream(zcx_comm* c, const OpArgs& a, zcx_stream_t stream, zcx_coll_request_t* req) {
  ZCX_CHECK_ARG(req == nullptr, kLogColl,
                "%s: the request forms take host buffers; with a CUDA stream use the blocking "
                "form", coll_kind_name(a.kind));
  int device = c->gpu ? c->gpu->device() : -1;
  ZCX_TRY(device_of_call(a, c->comm->nranks(), &device));
  if (!c->gpu) {
    ZCX_TRY(GpuRunner::create(device, &c->gpu));
    c->comm->attach_gpu(c->gpu.get());
  }
  return c->gpu->run(*c->comm, a, stream);
}

Status post(zcx_comm* c, const OpArgs& a, zcx_stream_t stream, zcx_coll_request_t* req) {
  CallScope scope(c);
  ZCX_TRY(scope.status());
  ZCX_TRY(check_args(c, a));
  if (stream != nullptr) return post_stream(c, a, stream, req);
  ZCX_TRY(host_turn(c));
  if (req == nullptr) return c->comm->run(a);
  std::shared_ptr<Op> op;
  ZCX_TRY(c->comm->post(a, &op));
  *req = new zcx_coll_request{c, op};
  return Status::kSuccess;
}

Status post_p2p(zcx_comm* c, const OpArgs& a, zcx_stream_t stream, zcx_coll_request_t* req) {
  CallScope scope(c);
  ZCX_TRY(scope.status());
  ZCX_TRY(check_args(c, a));
  if (stream != nullptr)
    return set_error(Status::kUnsupported, kLogColl,
                     "send/recv with a CUDA stream are not available yet: pass a NULL stream "
                     "with host buffers");
  ZCX_CHECK_ARG(a.count == 0 || a.sendbuf || a.recvbuf, kLogColl, "NULL buffer");
  ZCX_TRY(host_turn(c));
  if (t_group.depth > 0 && req == nullptr) {
    if (t_group.comm && t_group.comm != c)
      return t_group.error = set_error(Status::kInvalidUsage, kLogColl,
                                       "a group may hold the calls of one communicator only");
    t_group.comm = c;
    t_group.calls.push_back(a);
    return Status::kSuccess;
  }
  std::shared_ptr<Op> op;
  ZCX_TRY(c->comm->post_group({a}, &op));
  if (req == nullptr) return c->comm->wait(*op);
  *req = new zcx_coll_request{c, op};
  return Status::kSuccess;
}

OpArgs make(CollKind k, const void* s, void* r, size_t count, zcx_dtype_t dt, zcx_redop_t op,
            int root) {
  OpArgs a;
  a.kind = k, a.sendbuf = s, a.recvbuf = r, a.count = count, a.dtype = dt, a.op = op, a.root = root;
  return a;
}

Status init_on_context(std::unique_ptr<Context> owned, Context* ctx,
                       const zcx_comm_config_t* config, zcx_comm_t* out) {
  std::vector<int> world(ctx->nranks());
  for (int r = 0; r < ctx->nranks(); ++r) world[r] = r;
  std::string name = config && config->size >= sizeof(zcx_comm_config_t) && config->name
                         ? config->name : "world";
  auto handle = std::make_unique<zcx_comm>();
  ZCX_TRY(Comm::create(ctx, std::move(owned), std::move(world), ctx->rank(),
                       ctx->bootstrap().secret() ^ 0x636f6c6cull, name, &handle->comm));
  *out = comm_publish(std::move(handle));
  return Status::kSuccess;
}

// Removes the handle from the live set; false when it was not there.
bool comm_retire(zcx_comm* c) {
  std::lock_guard<std::mutex> lock(g_comms_mu);
  if (c == nullptr || !handle_live(c)) return false;
  handle_remove(c);
  c->aborting.store(true);
  return true;
}

// zcx_comm_abort: waits (bounded) for the calls inside the communicator to return; the
// abort request makes each fail at its next poll.
Status wait_for_calls(zcx_comm* c) {
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  while (c->calls.load() > 0) {
    if (dl.expired())
      return set_error(Status::kTimeout, kLogColl,
                       "zcx_comm_abort: %d call(s) on communicator '%s' did not return within "
                       "ZCX_TIMEOUT; it is left allocated",
                       c->calls.load(), c->comm->name().c_str());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return Status::kSuccess;
}

}  // namespace

zcx_comm* comm_publish(std::unique_ptr<zcx_comm> c) {
  handle_add(c.get());  // a new address: no call or retire can race on it
  return c.release();
}

}  // namespace zcx::coll

using namespace zcx;
using namespace zcx::coll;

extern "C" {

ZCX_API void zcx_comm_config_init(zcx_comm_config_t* config) {
  if (!config) return;
  *config = zcx_comm_config_t{};
  config->size = sizeof(*config);
  config->blocking = 1;
}

ZCX_API zcx_status_t zcx_comm_init_rank(zcx_comm_t* comm, int nranks, const zcx_unique_id_t* id,
                                        int rank, const zcx_comm_config_t* config) {
  return guarded([&] {
    ZCX_CHECK_ARG(comm && id && nranks > 0 && rank >= 0 && rank < nranks, kLogColl,
                  "zcx_comm_init_rank: bad arguments (rank %d of %d)", rank, nranks);
    UniqueId uid;
    ZCX_TRY(unique_id_decode(*id, &uid));
    std::unique_ptr<Bootstrap> bs;
    ZCX_TRY(Bootstrap::init(uid, rank, nranks, &bs));
    std::unique_ptr<Context> ctx;
    ZCX_TRY(Context::create(std::move(bs), &ctx));
    Context* raw = ctx.get();
    return init_on_context(std::move(ctx), raw, config, comm);
  });
}

ZCX_API zcx_status_t zcx_comm_init_env(zcx_comm_t* comm, const zcx_comm_config_t* config) {
  return guarded([&] {
    ZCX_CHECK_ARG(comm, kLogColl, "zcx_comm_init_env: NULL comm");
    std::unique_ptr<Bootstrap> bs;
    ZCX_TRY(Bootstrap::init_from_env(&bs));
    std::unique_ptr<Context> ctx;
    ZCX_TRY(Context::create(std::move(bs), &ctx));
    Context* raw = ctx.get();
    return init_on_context(std::move(ctx), raw, config, comm);
  });
}

ZCX_API zcx_status_t zcx_comm_split(zcx_comm_t comm, int color, int key, zcx_comm_t* newcomm,
                                    const zcx_comm_config_t* config) {
  return guarded([&] {
    ZCX_TRY(check_comm(comm));
    ZCX_CHECK_ARG(newcomm, kLogColl, "zcx_comm_split: NULL newcomm");
    ZCX_CHECK_ARG(color >= 0 || color == ZCX_SPLIT_NOCOLOR, kLogColl, "split color %d", color);
    (void)config;
    CallScope scope(comm);
    ZCX_TRY(scope.status());
    std::unique_ptr<Comm> sub;
    ZCX_TRY(host_turn(comm));
    ZCX_TRY(comm->comm->split(color, key, &sub));
    *newcomm = nullptr;
    if (!sub) return Status::kSuccess;
    auto handle = std::make_unique<zcx_comm>();
    handle->comm = std::move(sub);
    *newcomm = comm_publish(std::move(handle));
    return Status::kSuccess;
  });
}

ZCX_API zcx_status_t zcx_comm_destroy(zcx_comm_t comm) {
  if (!comm_retire(comm))
    return to_c(set_error(Status::kInvalidArg, kLogColl, "zcx_comm_destroy: not a live "
                          "communicator (NULL, destroyed or aborted)"));
  // Operations still queued own buffers the transport may write: finish them first. Failed
  // ones stay owned by the communicator until its context closes.
  Status gpu = comm->comm ? host_turn(comm) : Status::kSuccess;
  if (comm->gpu) comm->gpu->stop();
  zcx_status_t st = comm->comm ? to_c(comm->comm->drain()) : ZCX_SUCCESS;
  delete comm;
  return st != ZCX_SUCCESS ? st : to_c(gpu);
}

// May be called from another thread while a call is inside the communicator: new calls are
// refused at once, the calls inside fail at their next poll, and the communicator is freed
// once they have returned (bounded by ZCX_TIMEOUT).
ZCX_API zcx_status_t zcx_comm_abort(zcx_comm_t comm) {
  if (!comm_retire(comm))
    return to_c(set_error(Status::kInvalidArg, kLogColl, "zcx_comm_abort: not a live "
                          "communicator (NULL, destroyed or aborted)"));
  comm->comm->request_abort();
  if (Status s = wait_for_calls(comm); s != Status::kSuccess) return to_c(s);
  if (comm->gpu) comm->gpu->stop();  // ends a stream-ordered call in flight
  comm->comm->abort();
  delete comm;
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_rank(zcx_comm_t comm, int* rank) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess || !rank) return ZCX_ERR_INVALID_ARG;
  *rank = comm->comm->rank();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_nranks(zcx_comm_t comm, int* nranks) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess || !nranks) return ZCX_ERR_INVALID_ARG;
  *nranks = comm->comm->nranks();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_get_async_error(zcx_comm_t comm, zcx_status_t* error) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess) return to_c(scope.status());
  if (!error) return ZCX_ERR_INVALID_ARG;
  *error = to_c(comm->gpu ? comm->gpu->async_error(*comm->comm) : comm->comm->async_error());
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_register(zcx_comm_t comm, void* buf, size_t size, void** handle) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess) return to_c(scope.status());
  if (handle == nullptr || buf == nullptr || size == 0)
    return to_c(set_error(Status::kInvalidArg, kLogColl,
                          "zcx_comm_register: NULL handle output, NULL buffer or zero size"));
  if (Status s = comm->comm->context().mem_register(buf, size); s != Status::kSuccess)
    return to_c(s);
  comm->regs.push_back(std::make_unique<zcx_memreg>(zcx_memreg{buf, size}));
  *handle = comm->regs.back().get();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_deregister(zcx_comm_t comm, void* handle) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess) return to_c(scope.status());
  auto it = std::find_if(comm->regs.begin(), comm->regs.end(),
                         [&](const auto& r) { return r.get() == handle; });
  if (it == comm->regs.end())
    return to_c(set_error(Status::kInvalidArg, kLogColl,
                          "zcx_comm_deregister: not a registration of this communicator"));
  Status s = comm->comm->context().mem_deregister((*it)->buf, (*it)->size);
  comm->regs.erase(it);
  return to_c(s);
}

ZCX_API zcx_status_t zcx_iallreduce(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                    zcx_redop_t op, zcx_comm_t comm, zcx_stream_t stream,
                                    zcx_coll_request_t* req) {
  return guarded([&] { return post(comm, make(CollKind::kAllreduce, s, r, count, dt, op, -1), stream, req); });
}

ZCX_API zcx_status_t zcx_ibroadcast(const void* s, void* r, size_t count, zcx_dtype_t dt, int root,
                                    zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return guarded([&] { return post(comm, make(CollKind::kBroadcast, s, r, count, dt, ZCX_SUM, root), stream, req); });
}

ZCX_API zcx_status_t zcx_ireduce(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                 zcx_redop_t op, int root, zcx_comm_t comm, zcx_stream_t stream,
                                 zcx_coll_request_t* req) {
  return guarded([&] { return post(comm, make(CollKind::kReduce, s, r, count, dt, op, root), stream, req); });
}

ZCX_API zcx_status_t zcx_iallgather(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                    zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return guarded([&] { return post(comm, make(CollKind::kAllgather, s, r, count, dt, ZCX_SUM, -1), stream, req); });
}

ZCX_API zcx_status_t zcx_ireducescatter(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                        zcx_redop_t op, zcx_comm_t comm, zcx_stream_t stream,
                                        zcx_coll_request_t* req) {
  return guarded([&] { return post(comm, make(CollKind::kReducescatter, s, r, count, dt, op, -1), stream, req); });
}

ZCX_API zcx_status_t zcx_ialltoall(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                   zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return guarded([&] { return post(comm, make(CollKind::kAlltoall, s, r, count, dt, ZCX_SUM, -1), stream, req); });
}

ZCX_API zcx_status_t zcx_iallgatherv(const void* s, size_t sendcount, void* r,
                                     const size_t* recvcounts, const size_t* displs,
                                     zcx_dtype_t dt, zcx_comm_t comm, zcx_stream_t stream,
                                     zcx_coll_request_t* req) {
  return guarded([&] {
    ZCX_CHECK_ARG(recvcounts && displs, kLogColl, "allgatherv: NULL recvcounts/displs");
    OpArgs a = make(CollKind::kAllgatherv, s, r, sendcount, dt, ZCX_SUM, -1);
    a.counts = recvcounts, a.displs = displs;
    if (comm && comm->comm && recvcounts[comm->comm->rank()] != sendcount)
      return set_error(Status::kInvalidArg, kLogColl, "allgatherv: sendcount %zu but recvcounts[%d] = %zu",
                       sendcount, comm->comm->rank(), recvcounts[comm->comm->rank()]);
    return post(comm, a, stream, req);
  });
}

ZCX_API zcx_status_t zcx_ireducescatterv(const void* s, void* r, const size_t* recvcounts,
                                         zcx_dtype_t dt, zcx_redop_t op, zcx_comm_t comm,
                                         zcx_stream_t stream, zcx_coll_request_t* req) {
  return guarded([&] {
    ZCX_CHECK_ARG(recvcounts, kLogColl, "reducescatterv: NULL recvcounts");
    OpArgs a = make(CollKind::kReducescatterv, s, r, 0, dt, op, -1);
    a.counts = recvcounts;
    return post(comm, a, stream, req);
  });
}

ZCX_API zcx_status_t zcx_ialltoallv(const void* s, const size_t* sendcounts, const size_t* sdispls,
                                    void* r, const size_t* recvcounts, const size_t* rdispls,
                                    zcx_dtype_t dt, zcx_comm_t comm, zcx_stream_t stream,
                                    zcx_coll_request_t* req) {
  return guarded([&] {
    ZCX_CHECK_ARG(sendcounts && sdispls && recvcounts && rdispls, kLogColl,
                  "alltoallv: NULL count or displacement array");
    OpArgs a = make(CollKind::kAlltoallv, s, r, 0, dt, ZCX_SUM, -1);
    a.counts = sendcounts, a.displs = sdispls, a.rcounts = recvcounts, a.rdispls = rdispls;
    return post(comm, a, stream, req);
  });
}

ZCX_API zcx_status_t zcx_ibarrier_comm(zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return guarded([&] { return post(comm, make(CollKind::kBarrier, nullptr, nullptr, 0, ZCX_UINT8, ZCX_MAX, -1), stream, req); });
}

ZCX_API zcx_status_t zcx_coll_isend(const void* buf, size_t count, zcx_dtype_t dt, int peer,
                                    zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return guarded([&] { return post_p2p(comm, make(CollKind::kSendRecv, buf, nullptr, count, dt, ZCX_SUM, peer), stream, req); });
}

ZCX_API zcx_status_t zcx_coll_irecv(void* buf, size_t count, zcx_dtype_t dt, int peer,
                                    zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return guarded([&] { return post_p2p(comm, make(CollKind::kSendRecv, nullptr, buf, count, dt, ZCX_SUM, peer), stream, req); });
}

// Blocking forms: the request-based ones with no request.
ZCX_API zcx_status_t zcx_allreduce(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                   zcx_redop_t op, zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_iallreduce(s, r, count, dt, op, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_broadcast(const void* s, void* r, size_t count, zcx_dtype_t dt, int root,
                                   zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_ibroadcast(s, r, count, dt, root, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_reduce(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                zcx_redop_t op, int root, zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_ireduce(s, r, count, dt, op, root, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_allgather(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                   zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_iallgather(s, r, count, dt, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_reducescatter(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                       zcx_redop_t op, zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_ireducescatter(s, r, count, dt, op, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_alltoall(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                  zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_ialltoall(s, r, count, dt, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_allgatherv(const void* s, size_t sendcount, void* r,
                                    const size_t* recvcounts, const size_t* displs,
                                    zcx_dtype_t dt, zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_iallgatherv(s, sendcount, r, recvcounts, displs, dt, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_reducescatterv(const void* s, void* r, const size_t* recvcounts,
                                        zcx_dtype_t dt, zcx_redop_t op, zcx_comm_t comm,
                                        zcx_stream_t stream) {
  return zcx_ireducescatterv(s, r, recvcounts, dt, op, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_alltoallv(const void* s, const size_t* sc, const size_t* sd, void* r,
                                   const size_t* rc, const size_t* rd, zcx_dtype_t dt,
                                   zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_ialltoallv(s, sc, sd, r, rc, rd, dt, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_barrier_comm(zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_ibarrier_comm(comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_coll_send(const void* buf, size_t count, zcx_dtype_t dt, int peer,
                                   zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_coll_isend(buf, count, dt, peer, comm, stream, nullptr);
}
ZCX_API zcx_status_t zcx_coll_recv(void* buf, size_t count, zcx_dtype_t dt, int peer,
                                   zcx_comm_t comm, zcx_stream_t stream) {
  return zcx_coll_irecv(buf, count, dt, peer, comm, stream, nullptr);
}

ZCX_API zcx_status_t zcx_group_start(void) {
  ++t_group.depth;
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_group_end(void) {
  return guarded([&] {
    if (t_group.depth == 0)
      return set_error(Status::kInvalidUsage, kLogColl, "zcx_group_end without zcx_group_start");
    if (--t_group.depth > 0) return Status::kSuccess;
    GroupState g = std::move(t_group);
    t_group = GroupState{};
    if (g.error != Status::kSuccess) return g.error;
    if (g.calls.empty()) return Status::kSuccess;
    std::shared_ptr<Op> op;
    CallScope scope(g.comm);
    ZCX_TRY(scope.status());
    ZCX_TRY(host_turn(g.comm));
    ZCX_TRY(g.comm->comm->post_group(g.calls, &op));
    return g.comm->comm->wait(*op);
  });
}

// A request is a host operation: an asynchronous stream-ordered call drains every one before
// its progress thread takes the communicator (GpuAsync::submit), so these never race it.
// A request whose communicator was aborted or destroyed is refused and freed.
ZCX_API zcx_status_t zcx_coll_test(zcx_coll_request_t req, int* done) {
  if (!req || !done) return ZCX_ERR_INVALID_ARG;
  CallScope scope(req->owner);
  bool finished = false;
  Status st = scope.status();
  if (st == Status::kSuccess) st = req->owner->comm->test(*req->op, &finished);
  *done = finished ? 1 : 0;
  if (finished || st != Status::kSuccess) delete req;
  return to_c(st);
}

ZCX_API zcx_status_t zcx_coll_wait(zcx_coll_request_t req) {
  if (!req) return ZCX_ERR_INVALID_ARG;
  CallScope scope(req->owner);
  Status st = scope.status();
  if (st == Status::kSuccess) st = req->owner->comm->wait(*req->op);
  delete req;
  return to_c(st);
}

}  // extern "C"
