/* zcx collectives — public C API, version 0.
 *
 * A communicator is an ordered group of ranks that run collectives together. It sits on a
 * zcx context (zcx.h): connections to peers are made lazily, only to the peers an
 * algorithm needs. Shapes follow NCCL (ncclAllReduce & co.), plus the V forms NCCL lacks.
 *
 * Buffers: every operation takes a zcx_stream_t. NULL: host buffers, the call runs as
 * described below. A cudaStream_t (in a build with CUDA, where a driver is present): device
 * buffers (cudaMalloc/cuMemCreate, one device per communicator), blocking forms only. As
 * in NCCL the call is asynchronous to the host: it returns once the operation is queued
 * behind the work already on that stream, and work queued on the stream afterwards sees
 * the result (a communicator's progress thread runs it; the stream waits for it, at most
 * ZCX_GPU_STREAM_TIMEOUT). One such call is in flight per communicator: the next call, and
 * any call without a stream on the same communicator, first waits for it. A failure shows
 * in zcx_comm_get_async_error and at the next call; the stream goes on, and the failed
 * call's buffers hold undefined data that copies already started (a peer's, over cuda_ipc)
 * may still write, as after zcx_comm_abort. ZCX_GPU_ASYNC=0: the call waits for the
 * stream's earlier work, runs the operation and returns with the result in place.
 * Reductions run as CUDA kernels; data moves over cuda_ipc between ranks of one host, else
 * by GPUDirect RDMA where the host provider's device takes GPU memory (ib with nvidia_peermem
 * or dmabuf, UCX built with CUDA), else through pinned host memory over the host providers
 * (ZCX_GPU_STAGING=1 forces that). Send/recv take a stream too, alone or in a group whose
 * calls all pass the same stream. The request forms take host buffers only (a stream there
 * is refused).
 *
 * Blocking forms return when this rank's part is complete. The zcx_coll_i* forms return a
 * request; zcx_coll_test / zcx_coll_wait finish it. Operations on one communicator complete
 * in issue order, and every rank must issue the same sequence of collectives on a
 * communicator (same op, dtype, count, root). Disagreement is detected by a descriptor that
 * travels ahead of the data on every link and to each rank's ring successor: a rank that
 * receives a differing one fails with ZCX_ERR_MISMATCH (naming the peer and the fields), the
 * others fail with that peer's error or ZCX_ERR_TIMEOUT — never a hang, and no data from a
 * disagreeing peer is used. (A rank whose operation only involved agreeing peers may
 * complete with the result they define.) A dead or silent peer fails the operation with an error naming
 * that rank and host (ZCX_ERR_REMOTE or ZCX_ERR_TIMEOUT, bounded by ZCX_TIMEOUT); the
 * communicator then refuses further operations (sticky error; zcx_comm_get_async_error).
 *
 * In place: allreduce/broadcast/reduce with sendbuf == recvbuf; allgather with
 * sendbuf == recvbuf + rank * count * size; reducescatter with
 * sendbuf + rank * recvcount * size == recvbuf; alltoall with sendbuf == recvbuf.
 * For the V forms the same rule applies with the displacement of this rank.
 *
 * Configuration (ZCX_ALGO, ZCX_CHUNK_SIZE, the cost-model variables, ZCX_TIMEOUT) is read from
 * the environment when a communicator first needs it; changing the environment later does not
 * affect that communicator (like NCCL's variables).
 *
 * avg: the sum, divided by nranks at the end; integer types truncate toward zero.
 * float16/bfloat16: each binary reduction is computed in float32 and rounded to nearest
 * even; results are bit-identical whichever CPU SIMD path runs. */
#ifndef ZCX_COLL_H
#define ZCX_COLL_H

#include <zcx/zcx.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zcx_comm* zcx_comm_t;
typedef struct zcx_coll_request* zcx_coll_request_t;
/* A cudaStream_t for stream-ordered operations on device buffers, or NULL (host buffers). */
typedef void* zcx_stream_t;

typedef enum {
  ZCX_INT8 = 0,
  ZCX_UINT8 = 1,
  ZCX_INT32 = 2,
  ZCX_UINT32 = 3,
  ZCX_INT64 = 4,
  ZCX_UINT64 = 5,
  ZCX_FLOAT16 = 6,
  ZCX_BFLOAT16 = 7,
  ZCX_FLOAT32 = 8,
  ZCX_FLOAT64 = 9,
  ZCX_DTYPE_COUNT,
  ZCX_DTYPE_FORCE_INT = 0x7fffffff /* any int is a representable (if invalid) value */
} zcx_dtype_t;

typedef enum {
  ZCX_SUM = 0,
  ZCX_PROD = 1,
  ZCX_MIN = 2,
  ZCX_MAX = 3,
  ZCX_AVG = 4,
  ZCX_REDOP_COUNT,
  ZCX_REDOP_FORCE_INT = 0x7fffffff
} zcx_redop_t;

ZCX_API size_t zcx_dtype_size(zcx_dtype_t dtype); /* 0 for an invalid dtype */
ZCX_API const char* zcx_dtype_name(zcx_dtype_t dtype);
ZCX_API const char* zcx_redop_name(zcx_redop_t op);

/* Communicator options. Start with zcx_comm_config_init(); fields may be added at the end
 * (size tells the library which ones the caller knows). */
typedef struct {
  size_t size;          /* sizeof(zcx_comm_config_t) as the caller compiled it */
  int blocking;         /* reserved: 1 = init blocks until connected (default 1) */
  const char* name;     /* for logs and errors; NULL = "comm<id>"; copied */
} zcx_comm_config_t;
ZCX_API void zcx_comm_config_init(zcx_comm_config_t* config);

/* ---- Communicator lifecycle ---------------------------------------------------------- */
/* Like ncclCommInitRank: the id comes from zcx_get_unique_id() on one rank (zcx.h).
 * config may be NULL. */
ZCX_API zcx_status_t zcx_comm_init_rank(zcx_comm_t* comm, int nranks, const zcx_unique_id_t* id,
                                        int rank, const zcx_comm_config_t* config);
/* From ZCX_RANK/ZCX_NRANKS/ZCX_ROOT or the mpirun/srun/torchrun variables. */
ZCX_API zcx_status_t zcx_comm_init_env(zcx_comm_t* comm, const zcx_comm_config_t* config);
/* Over an existing context (the communicator does not own it; destroy the comm first).
 * Communicators over one context share its connections, whose messages are matched in
 * order: operations of two of them must not be in flight at the same time (a call on one
 * while another has operations in flight fails with ZCX_ERR_INVALID_USAGE, naming it). */
ZCX_API zcx_status_t zcx_comm_init_context(zcx_comm_t* comm, zcx_context_t ctx,
                                           const zcx_comm_config_t* config);
/* Collective over comm. Ranks passing the same color form a new communicator, ordered by
 * key then by old rank. color ZCX_SPLIT_NOCOLOR: *newcomm = NULL. The new communicator has a
 * context (bootstrap, connections) of its own, as ncclCommSplit: its operations may be in
 * flight together with its parent's, in any order, from other threads too. */
#define ZCX_SPLIT_NOCOLOR (-1)
ZCX_API zcx_status_t zcx_comm_split(zcx_comm_t comm, int color, int key, zcx_comm_t* newcomm,
                                    const zcx_comm_config_t* config);
/* Waits (bounded) for pending operations, then frees. Requests still open are completed by
 * it and must not be used afterwards. A split communicator does not depend on its parent:
 * either may be destroyed first. */
ZCX_API zcx_status_t zcx_comm_destroy(zcx_comm_t comm);
/* Fails pending and future operations with ZCX_ERR_ABORTED and frees; bounded. May be
 * called from another thread while a call is blocked inside the communicator (a watchdog):
 * that call returns ZCX_ERR_ABORTED at its next poll, and the communicator is freed once it
 * has (within ZCX_TIMEOUT; else ZCX_ERR_TIMEOUT and it stays allocated). Calls on the handle
 * afterwards are refused with ZCX_ERR_INVALID_ARG while its memory is not reused. Buffers of
 * the aborted calls may still be written by the transport until the context is aborted or
 * finalized (a communicator from zcx_comm_init_env/_rank owns its context, and aborts it). */
ZCX_API zcx_status_t zcx_comm_abort(zcx_comm_t comm);
ZCX_API zcx_status_t zcx_comm_rank(zcx_comm_t comm, int* rank);
ZCX_API zcx_status_t zcx_comm_nranks(zcx_comm_t comm, int* nranks);
/* The sticky error of the communicator (ZCX_SUCCESS when healthy). */
ZCX_API zcx_status_t zcx_comm_get_async_error(zcx_comm_t comm, zcx_status_t* error);
/* A buffer that operations use again and again (as ncclCommRegister). Over a provider that
 * registers memory (ib), an operation registers its buffers for its own span only, since
 * the caller may free them afterwards; buffers inside a range registered here share one
 * registration per connection until zcx_comm_deregister (or zcx_comm_destroy). The range
 * must stay allocated until then. A range may be registered more than once (each handle is
 * deregistered once). Host or device memory; no-op cost over tcp and shm. */
ZCX_API zcx_status_t zcx_comm_register(zcx_comm_t comm, void* buf, size_t size, void** handle);
ZCX_API zcx_status_t zcx_comm_deregister(zcx_comm_t comm, void* handle);

/* ---- Collectives (blocking) ---------------------------------------------------------- */
/* count is in elements of dtype; counts/displs of the V forms too. */
ZCX_API zcx_status_t zcx_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                                   zcx_dtype_t dtype, zcx_redop_t op, zcx_comm_t comm,
                                   zcx_stream_t stream);
ZCX_API zcx_status_t zcx_broadcast(const void* sendbuf, void* recvbuf, size_t count,
                                   zcx_dtype_t dtype, int root, zcx_comm_t comm,
                                   zcx_stream_t stream);
/* recvbuf is used on the root only (may be NULL elsewhere). */
ZCX_API zcx_status_t zcx_reduce(const void* sendbuf, void* recvbuf, size_t count,
                                zcx_dtype_t dtype, zcx_redop_t op, int root, zcx_comm_t comm,
                                zcx_stream_t stream);
/* recvbuf holds nranks * sendcount elements, rank r's block at r * sendcount. */
ZCX_API zcx_status_t zcx_allgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                   zcx_dtype_t dtype, zcx_comm_t comm, zcx_stream_t stream);
/* sendbuf holds nranks * recvcount elements; this rank gets block `rank`, reduced. */
ZCX_API zcx_status_t zcx_reducescatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                       zcx_dtype_t dtype, zcx_redop_t op, zcx_comm_t comm,
                                       zcx_stream_t stream);
/* count elements go to each peer: block p of sendbuf to rank p, block p of recvbuf from p. */
ZCX_API zcx_status_t zcx_alltoall(const void* sendbuf, void* recvbuf, size_t count,
                                  zcx_dtype_t dtype, zcx_comm_t comm, zcx_stream_t stream);
/* recvcounts/displs: nranks entries, identical on every rank. */
ZCX_API zcx_status_t zcx_allgatherv(const void* sendbuf, size_t sendcount, void* recvbuf,
                                    const size_t* recvcounts, const size_t* displs,
                                    zcx_dtype_t dtype, zcx_comm_t comm, zcx_stream_t stream);
/* sendbuf holds sum(recvcounts) elements, block r (at the prefix sum) reduced to rank r. */
ZCX_API zcx_status_t zcx_reducescatterv(const void* sendbuf, void* recvbuf,
                                        const size_t* recvcounts, zcx_dtype_t dtype,
                                        zcx_redop_t op, zcx_comm_t comm, zcx_stream_t stream);
/* sendcounts[p] elements at sdispls[p] go to rank p; recvcounts[p] arrive at rdispls[p].
 * sendcounts[p] on this rank must equal recvcounts[me] on rank p (checked). */
ZCX_API zcx_status_t zcx_alltoallv(const void* sendbuf, const size_t* sendcounts,
                                   const size_t* sdispls, void* recvbuf,
                                   const size_t* recvcounts, const size_t* rdispls,
                                   zcx_dtype_t dtype, zcx_comm_t comm, zcx_stream_t stream);
ZCX_API zcx_status_t zcx_barrier_comm(zcx_comm_t comm, zcx_stream_t stream);

/* Point to point. Outside a group they complete before returning (with a stream: as a
 * collective does, above); inside a group they are posted together at zcx_group_end. The
 * receiver must pass the sender's count (checked). */
ZCX_API zcx_status_t zcx_coll_send(const void* buf, size_t count, zcx_dtype_t dtype, int peer,
                                   zcx_comm_t comm, zcx_stream_t stream);
ZCX_API zcx_status_t zcx_coll_recv(void* buf, size_t count, zcx_dtype_t dtype, int peer,
                                   zcx_comm_t comm, zcx_stream_t stream);

/* Groups: point-to-point calls between start and end (nestable, per thread) are posted
 * together at the outermost end, which then waits for all of them (with a stream: queues
 * them on it as one operation). One communicator and one stream (or none) per group;
 * collectives inside a group run at once, as outside (this version). A rank may send
 * to itself: each send to self pairs, in call order, with a receive from self of the same
 * size in the same group (a copy); an unpaired one is refused (ZCX_ERR_INVALID_USAGE). */
ZCX_API zcx_status_t zcx_group_start(void);
ZCX_API zcx_status_t zcx_group_end(void);

/* ---- Request-based forms (host buffers) ---------------------------------------------- */
/* Same arguments as the blocking form, plus *req. Buffers must stay valid until done. */
ZCX_API zcx_status_t zcx_iallreduce(const void* sendbuf, void* recvbuf, size_t count,
                                    zcx_dtype_t dtype, zcx_redop_t op, zcx_comm_t comm,
                                    zcx_stream_t stream, zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_ibroadcast(const void* sendbuf, void* recvbuf, size_t count,
                                    zcx_dtype_t dtype, int root, zcx_comm_t comm,
                                    zcx_stream_t stream, zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_ireduce(const void* sendbuf, void* recvbuf, size_t count,
                                 zcx_dtype_t dtype, zcx_redop_t op, int root, zcx_comm_t comm,
                                 zcx_stream_t stream, zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_iallgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                    zcx_dtype_t dtype, zcx_comm_t comm, zcx_stream_t stream,
                                    zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_ireducescatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                        zcx_dtype_t dtype, zcx_redop_t op, zcx_comm_t comm,
                                        zcx_stream_t stream, zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_ialltoall(const void* sendbuf, void* recvbuf, size_t count,
                                   zcx_dtype_t dtype, zcx_comm_t comm, zcx_stream_t stream,
                                   zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_iallgatherv(const void* sendbuf, size_t sendcount, void* recvbuf,
                                     const size_t* recvcounts, const size_t* displs,
                                     zcx_dtype_t dtype, zcx_comm_t comm, zcx_stream_t stream,
                                     zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_ireducescatterv(const void* sendbuf, void* recvbuf,
                                         const size_t* recvcounts, zcx_dtype_t dtype,
                                         zcx_redop_t op, zcx_comm_t comm, zcx_stream_t stream,
                                         zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_ialltoallv(const void* sendbuf, const size_t* sendcounts,
                                    const size_t* sdispls, void* recvbuf,
                                    const size_t* recvcounts, const size_t* rdispls,
                                    zcx_dtype_t dtype, zcx_comm_t comm, zcx_stream_t stream,
                                    zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_ibarrier_comm(zcx_comm_t comm, zcx_stream_t stream,
                                       zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_coll_isend(const void* buf, size_t count, zcx_dtype_t dtype, int peer,
                                    zcx_comm_t comm, zcx_stream_t stream,
                                    zcx_coll_request_t* req);
ZCX_API zcx_status_t zcx_coll_irecv(void* buf, size_t count, zcx_dtype_t dtype, int peer,
                                    zcx_comm_t comm, zcx_stream_t stream,
                                    zcx_coll_request_t* req);

/* *done = 1 when complete; the request is then freed. A failed operation also frees it and
 * returns its error. */
ZCX_API zcx_status_t zcx_coll_test(zcx_coll_request_t req, int* done);
ZCX_API zcx_status_t zcx_coll_wait(zcx_coll_request_t req); /* bounded by ZCX_TIMEOUT */

/* ---- Optional MPI bridge (libzcx-mpi; the core never links MPI) ---------------------- */
/* Declared in <zcx/coll_mpi.h>: zcx_comm_init_mpi(zcx_comm_t*, MPI_Comm, config). */

#ifdef __cplusplus
}
#endif
#endif /* ZCX_COLL_H */
