// Public C API of the collectives (coll.h), the operations: argument checks, blocking and
// request forms, groups, test and wait. No exception leaves this file.
#include "algorithms/algorithms.h"
#include "base/api_internal.h"
#include "common/check.h"
#include "common/dl/device_memory.h"
#include "core/api_call.h"
#include "core/api_handles.h"
#include "core/comm.h"

#include <zcx/coll.h>

#include <memory>
#include <vector>

namespace zcx::coll {
namespace {

// Calls between zcx_group_start and the outermost zcx_group_end, per thread.
struct GroupState {
  int depth = 0;
  zcx_comm* comm = nullptr;
  zcx_stream_t stream = nullptr;  // the calls' CUDA stream (one for all), or NULL: host buffers
  std::vector<OpArgs> calls;
  Status error = Status::kSuccess;
};
thread_local GroupState t_group;

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

// Checks that the buffers of `a` are device memory of the runner's device, and makes the
// communicator's runner of calls with a CUDA stream (c->gpu) at the first one.
Status check_gpu_call(zcx_comm* c, const OpArgs& a) {
  int device = c->gpu ? c->gpu->device() : -1;
  ZCX_TRY(device_of_call(a, c->comm->nranks(), &device));
  if (!c->gpu) {
    ZCX_TRY(GpuRunner::create(device, &c->gpu));
    c->comm->attach_gpu(c->gpu.get());
  }
  return Status::kSuccess;
}

// A call without a stream runs on host buffers, which the CPU reads and writes (it faults on
// device memory): a GPU buffer there is an error, not a crash (cuda_is_device_memory; an
// in-place call's one buffer is asked about once). Then the call waits its turn behind
// stream-ordered ones.
Status host_call(zcx_comm* c, const OpArgs& a) {
  const void* recv = a.recvbuf;
  for (const void* p : {a.sendbuf, recv == a.sendbuf ? nullptr : recv})
    ZCX_CHECK_ARG(a.count == 0 || !cuda_is_device_memory(p), kLogColl,
                  "%s: buffer %p is GPU memory; a call on device buffers takes the CUDA stream "
                  "it is ordered on", coll_kind_name(a.kind), p);
  return host_turn(c);
}

// A call with a CUDA stream (gpu_runner.h): device buffers, ordered after the stream's
// earlier work; queued (asynchronous) or complete when it returns (ZCX_GPU_ASYNC=0).
Status post_stream(zcx_comm* c, const OpArgs& a, zcx_stream_t stream, zcx_coll_request_t* req) {
  ZCX_CHECK_ARG(req == nullptr, kLogColl,
                "%s: the request forms take host buffers; with a CUDA stream use the blocking "
                "form", coll_kind_name(a.kind));
  ZCX_TRY(check_gpu_call(c, a));
  return c->gpu->run(*c->comm, {a}, stream);
}

Status post(zcx_comm* c, const OpArgs& a, zcx_stream_t stream, zcx_coll_request_t* req) {
  CallScope scope(c);
  ZCX_TRY(scope.status());
  ZCX_TRY(check_args(c, a));
  if (stream != nullptr) return post_stream(c, a, stream, req);
  ZCX_TRY(host_call(c, a));
  if (req == nullptr) return c->comm->run(a);
  std::shared_ptr<Op> op;
  ZCX_TRY(c->comm->post(a, &op));
  *req = new zcx_coll_request{c, op};
  return Status::kSuccess;
}

// A point-to-point call inside a group, kept for zcx_group_end. A group's calls share one
// communicator and one stream (or all pass none); a call that breaks this fails the group.
Status group_add(zcx_comm* c, const OpArgs& a, zcx_stream_t stream) {
  GroupState& g = t_group;
  if (!g.calls.empty() && g.comm != c)
    return g.error = set_error(Status::kInvalidUsage, kLogColl,
                               "a group may hold the calls of one communicator only");
  if (!g.calls.empty() && g.stream != stream)
    return g.error = set_error(Status::kInvalidUsage, kLogColl,
                               "the calls of a group take one CUDA stream, or all none");
  Status st = stream != nullptr ? check_gpu_call(c, a) : host_call(c, a);
  if (st != Status::kSuccess) return g.error = st;
  g.comm = c, g.stream = stream;
  g.calls.push_back(a);
  return Status::kSuccess;
}

Status post_p2p(zcx_comm* c, const OpArgs& a, zcx_stream_t stream, zcx_coll_request_t* req) {
  CallScope scope(c);
  ZCX_TRY(scope.status());
  ZCX_TRY(check_args(c, a));
  ZCX_CHECK_ARG(a.count == 0 || a.sendbuf || a.recvbuf, kLogColl, "NULL buffer");
  if (t_group.depth > 0 && req == nullptr) return group_add(c, a, stream);
  if (stream != nullptr) return post_stream(c, a, stream, req);
  ZCX_TRY(host_call(c, a));
  std::shared_ptr<Op> op;
  ZCX_TRY(c->comm->post_group({a}, &op));
  if (req == nullptr) return c->comm->wait(*op);
  *req = new zcx_coll_request{c, op};
  return Status::kSuccess;
}

OpArgs make(CollKind k, const void* s, void* r, size_t count, zcx_dtype_t dt, zcx_redop_t op,
            int root) {
  OpArgs a;
  a.kind = k, a.sendbuf = s, a.recvbuf = r, a.count = count, a.dtype = dt, a.op = op;
  a.root = root;
  return a;
}

// An operation's C entry point: post (collectives) or post_p2p, guarded.
zcx_status_t run_call(zcx_comm* c, const OpArgs& a, zcx_stream_t stream, zcx_coll_request_t* req) {
  return guarded([&] { return post(c, a, stream, req); });
}
zcx_status_t run_p2p_call(zcx_comm* c, const OpArgs& a, zcx_stream_t stream,
                          zcx_coll_request_t* req) {
  return guarded([&] { return post_p2p(c, a, stream, req); });
}

}  // namespace
}  // namespace zcx::coll

using namespace zcx;
using namespace zcx::coll;

extern "C" {

ZCX_API zcx_status_t zcx_iallreduce(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                    zcx_redop_t op, zcx_comm_t comm, zcx_stream_t stream,
                                    zcx_coll_request_t* req) {
  return run_call(comm, make(CollKind::kAllreduce, s, r, count, dt, op, -1), stream, req);
}

ZCX_API zcx_status_t zcx_ibroadcast(const void* s, void* r, size_t count, zcx_dtype_t dt, int root,
                                    zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return run_call(comm, make(CollKind::kBroadcast, s, r, count, dt, ZCX_SUM, root), stream, req);
}

ZCX_API zcx_status_t zcx_ireduce(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                 zcx_redop_t op, int root, zcx_comm_t comm, zcx_stream_t stream,
                                 zcx_coll_request_t* req) {
  return run_call(comm, make(CollKind::kReduce, s, r, count, dt, op, root), stream, req);
}

ZCX_API zcx_status_t zcx_iallgather(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                    zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return run_call(comm, make(CollKind::kAllgather, s, r, count, dt, ZCX_SUM, -1), stream, req);
}

ZCX_API zcx_status_t zcx_ireducescatter(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                        zcx_redop_t op, zcx_comm_t comm, zcx_stream_t stream,
                                        zcx_coll_request_t* req) {
  return run_call(comm, make(CollKind::kReducescatter, s, r, count, dt, op, -1), stream, req);
}

ZCX_API zcx_status_t zcx_ialltoall(const void* s, void* r, size_t count, zcx_dtype_t dt,
                                   zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  return run_call(comm, make(CollKind::kAlltoall, s, r, count, dt, ZCX_SUM, -1), stream, req);
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
      return set_error(Status::kInvalidArg, kLogColl,
                       "allgatherv: sendcount %zu but recvcounts[%d] = %zu", sendcount,
                       comm->comm->rank(), recvcounts[comm->comm->rank()]);
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

ZCX_API zcx_status_t zcx_ibarrier_comm(zcx_comm_t comm, zcx_stream_t stream,
                                       zcx_coll_request_t* req) {
  return run_call(comm, make(CollKind::kBarrier, nullptr, nullptr, 0, ZCX_UINT8, ZCX_MAX, -1),
                  stream, req);
}

ZCX_API zcx_status_t zcx_coll_isend(const void* buf, size_t count, zcx_dtype_t dt, int peer,
                                    zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  OpArgs a = make(CollKind::kSendRecv, buf, nullptr, count, dt, ZCX_SUM, peer);
  return run_p2p_call(comm, a, stream, req);
}

ZCX_API zcx_status_t zcx_coll_irecv(void* buf, size_t count, zcx_dtype_t dt, int peer,
                                    zcx_comm_t comm, zcx_stream_t stream, zcx_coll_request_t* req) {
  OpArgs a = make(CollKind::kSendRecv, nullptr, buf, count, dt, ZCX_SUM, peer);
  return run_p2p_call(comm, a, stream, req);
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
    if (g.stream != nullptr) return g.comm->gpu->run(*g.comm->comm, std::move(g.calls), g.stream);
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
