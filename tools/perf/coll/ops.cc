#include "coll/ops.h"

#include <cstring>

namespace zcx::perf {
namespace {

// ---- Shapes (nccl-tests' *GetCollByteCount) --------------------------------------------
CollShape same_count(size_t count, size_t) { return {count, count, count, 0, 0}; }

CollShape allgather_shape(size_t count, size_t n) {
  size_t block = count / n;
  return {block, block, block * n, block, 0};
}

CollShape reducescatter_shape(size_t count, size_t n) {
  size_t block = count / n;
  return {block, block * n, block, 0, block};
}

CollShape alltoall_shape(size_t count, size_t n) {
  size_t block = count / n;
  return {block, block * n, block * n, 0, 0};
}

// ---- Bus bandwidth factors (doc/PERFORMANCE.md) ---------------------------------------
double one(int) { return 1.0; }
double allreduce_factor(int n) { return 2.0 * (n - 1) / n; }
double gather_factor(int n) { return static_cast<double>(n - 1) / n; }

// ---- Calls ------------------------------------------------------------------------------
zcx_status_t run_allreduce(const void* s, void* r, size_t count, const CollCall& c) {
  return zcx_allreduce(s, r, count, c.dtype, c.redop, c.comm, c.stream);
}

zcx_status_t run_broadcast(const void* s, void* r, size_t count, const CollCall& c) {
  return zcx_broadcast(s, r, count, c.dtype, c.root, c.comm, c.stream);
}

zcx_status_t run_reduce(const void* s, void* r, size_t count, const CollCall& c) {
  return zcx_reduce(s, r, count, c.dtype, c.redop, c.root, c.comm, c.stream);
}

zcx_status_t run_allgather(const void* s, void* r, size_t count, const CollCall& c) {
  return zcx_allgather(s, r, count, c.dtype, c.comm, c.stream);
}

zcx_status_t run_reducescatter(const void* s, void* r, size_t count, const CollCall& c) {
  return zcx_reducescatter(s, r, count, c.dtype, c.redop, c.comm, c.stream);
}

zcx_status_t run_alltoall(const void* s, void* r, size_t count, const CollCall& c) {
  return zcx_alltoall(s, r, count, c.dtype, c.comm, c.stream);
}

// As nccl-tests' sendrecv: every rank sends to the next and receives from the previous.
zcx_status_t run_sendrecv(const void* s, void* r, size_t count, const CollCall& c) {
  zcx_status_t st = zcx_group_start();
  if (st != ZCX_SUCCESS) return st;
  zcx_status_t send = zcx_coll_send(s, count, c.dtype, (c.rank + 1) % c.nranks, c.comm, c.stream);
  zcx_status_t recv =
      zcx_coll_recv(r, count, c.dtype, (c.rank + c.nranks - 1) % c.nranks, c.comm, c.stream);
  st = zcx_group_end();  // always closes the group, even after a failed post
  return send != ZCX_SUCCESS ? send : recv != ZCX_SUCCESS ? recv : st;
}

using Request = zcx_coll_request_t*;
zcx_status_t post_allreduce(const void* s, void* r, size_t count, const CollCall& c, Request q) {
  return zcx_iallreduce(s, r, count, c.dtype, c.redop, c.comm, nullptr, q);
}

zcx_status_t post_broadcast(const void* s, void* r, size_t count, const CollCall& c, Request q) {
  return zcx_ibroadcast(s, r, count, c.dtype, c.root, c.comm, nullptr, q);
}

zcx_status_t post_reduce(const void* s, void* r, size_t count, const CollCall& c, Request q) {
  return zcx_ireduce(s, r, count, c.dtype, c.redop, c.root, c.comm, nullptr, q);
}

zcx_status_t post_allgather(const void* s, void* r, size_t count, const CollCall& c, Request q) {
  return zcx_iallgather(s, r, count, c.dtype, c.comm, nullptr, q);
}

zcx_status_t post_reducescatter(const void* s, void* r, size_t count, const CollCall& c,
                                Request q) {
  return zcx_ireducescatter(s, r, count, c.dtype, c.redop, c.comm, nullptr, q);
}

zcx_status_t post_alltoall(const void* s, void* r, size_t count, const CollCall& c, Request q) {
  return zcx_ialltoall(s, r, count, c.dtype, c.comm, nullptr, q);
}

constexpr CollOp kOps[] = {
    {"allreduce", CollKind::kAllreduce, true, false, same_count, false, allreduce_factor, run_allreduce, true,
     post_allreduce},
    {"broadcast", CollKind::kBroadcast, false, true, same_count, false, one, run_broadcast, true, post_broadcast},
    {"reduce", CollKind::kReduce, true, true, same_count, false, one, run_reduce, true, post_reduce},
    {"allgather", CollKind::kAllgather, false, false, allgather_shape, true, gather_factor, run_allgather, true,
     post_allgather},
    {"reducescatter", CollKind::kReducescatter, true, false, reducescatter_shape, true, gather_factor, run_reducescatter,
     true, post_reducescatter},
    {"alltoall", CollKind::kAlltoall, false, false, alltoall_shape, true, gather_factor, run_alltoall, true,
     post_alltoall},
    {"sendrecv", CollKind::kSendrecv, false, false, same_count, false, one, run_sendrecv, false, nullptr},
};

}  // namespace

const CollOp* find_coll_op(const char* name) {
  for (const CollOp& op : kOps)
    if (!std::strcmp(op.name, name)) return &op;
  return nullptr;
}

}  // namespace zcx::perf
