// The collectives zcx-perf coll measures, described as nccl-tests describes them: for a
// table size S (bytes) how many elements each call sends and receives, where the in-place
// buffers sit, and how algbw and busbw follow from the time (nccl-tests doc/PERFORMANCE.md).
#pragma once

#include <zcx/coll.h>

#include <cstddef>

namespace zcx::perf {

// Element counts for one call. The "size" column is max(send, recv) * element size and the
// "count" column is `param` (the count argument of the call), as in nccl-tests.
struct CollShape {
  size_t param = 0;           // count argument of the zcx call
  size_t send = 0, recv = 0;  // elements in this rank's send and receive buffers
  // In place: sendbuf = recvbuf + send_inplace * rank, recvbuf += recv_inplace * rank.
  size_t send_inplace = 0, recv_inplace = 0;
};

// What one call needs besides the buffers.
struct CollCall {
  zcx_comm_t comm = nullptr;
  int rank = 0, nranks = 1;
  zcx_dtype_t dtype = ZCX_FLOAT32;
  zcx_redop_t redop = ZCX_SUM;
  int root = 0;
  zcx_stream_t stream = nullptr;  // --device gpu: the CUDA stream every call is ordered on
};

enum class CollKind { kAllreduce, kBroadcast, kReduce, kAllgather, kReducescatter, kAlltoall,
                      kSendrecv };

struct CollOp {
  const char* name;
  CollKind kind;
  bool reduces;  // takes a reduction op (the "redop" column; "none" otherwise)
  bool rooted;   // takes a root (the "root" column; -1 otherwise)
  // `count` = S / element size, as nccl-tests' getCollByteCount.
  CollShape (*shape)(size_t count, size_t nranks);
  // algbw = param * element size (* nranks when algbw_times_nranks) / time;
  // busbw = algbw * bus_factor(nranks).
  bool algbw_times_nranks;
  double (*bus_factor)(int nranks);
  zcx_status_t (*run)(const void* send, void* recv, size_t count, const CollCall& c);
  bool checks_in_place;  // false: the in-place result is not defined (sendrecv)
  // The request form on host buffers (zcx_i*), for --overlap; nullptr for sendrecv.
  zcx_status_t (*post)(const void* send, void* recv, size_t count, const CollCall& c,
                       zcx_coll_request_t* req);
};

// nullptr for an unknown name.
const CollOp* find_coll_op(const char* name);

}  // namespace zcx::perf
