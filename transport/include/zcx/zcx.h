/* zcx: zero-copy exchange — public C API, version 0.
 *
 * A context joins one process (a rank) to a job of nranks processes. Endpoints carry
 * two-sided point-to-point messages between two ranks over the best provider that
 * reaches the peer (ZCX_PROVIDERS). Every call returns a status; none blocks without a
 * bound (ZCX_TIMEOUT). zcx_get_last_error() describes the last failure of this thread. */
#ifndef ZCX_ZCX_H
#define ZCX_ZCX_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define ZCX_API __attribute__((visibility("default")))
#else
#define ZCX_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes, grouped by blast radius: an operation, a peer, the whole process. */
typedef enum {
  ZCX_SUCCESS = 0,
  ZCX_IN_PROGRESS = 1,          /* not done yet: call again (test/connect/accept) */
  ZCX_ERR_INVALID_ARG = 2,      /* caller error: NULL, overflow, bad handle */
  ZCX_ERR_INVALID_USAGE = 3,    /* wrong call order, mismatched sizes, truncation */
  ZCX_ERR_UNSUPPORTED = 4,      /* optional operation the provider does not have */
  ZCX_ERR_NO_MEMORY = 5,
  ZCX_ERR_NO_DEVICE = 6,        /* no usable device or provider */
  ZCX_ERR_SYSTEM = 7,           /* a system call failed (errno in the message) */
  ZCX_ERR_REMOTE = 8,           /* the peer closed, died or is unreachable */
  ZCX_ERR_TIMEOUT = 9,          /* no progress within ZCX_TIMEOUT */
  ZCX_ERR_PROTOCOL = 10,        /* malformed or unexpected data from the wire */
  ZCX_ERR_AUTH = 11,            /* wrong job secret or version */
  ZCX_ERR_ABORTED = 12,         /* the context or communicator was aborted */
  ZCX_ERR_MISMATCH = 13,        /* ranks disagree (collective, count, type) */
  ZCX_ERR_INTERNAL = 14,
  ZCX_STATUS_COUNT
} zcx_status_t;

/* 128-byte opaque id: the root's address plus a random 64-bit job secret. */
#define ZCX_UNIQUE_ID_BYTES 128
typedef struct { char internal[ZCX_UNIQUE_ID_BYTES]; } zcx_unique_id_t;

typedef struct zcx_context* zcx_context_t;
typedef struct zcx_endpoint* zcx_endpoint_t;
typedef struct zcx_request* zcx_request_t;
typedef struct zcx_memreg* zcx_memreg_t;

ZCX_API const char* zcx_version_string(void);      /* "0.1.0" */
ZCX_API int zcx_version(void);                      /* major*10000 + minor*100 + patch */
ZCX_API const char* zcx_status_string(zcx_status_t status);
ZCX_API const char* zcx_get_last_error(void);       /* this thread's last error message */

/* Bootstrap. The root calls zcx_get_unique_id and ships the id to the others. */
ZCX_API zcx_status_t zcx_get_unique_id(zcx_unique_id_t* id);
ZCX_API zcx_status_t zcx_init_rank(zcx_context_t* ctx, int nranks, const zcx_unique_id_t* id,
                                   int rank);
/* From the environment: ZCX_RANK/ZCX_NRANKS/ZCX_ROOT, mpirun, srun or torchrun variables. */
ZCX_API zcx_status_t zcx_init_from_env(zcx_context_t* ctx);
ZCX_API zcx_status_t zcx_finalize(zcx_context_t ctx);
ZCX_API zcx_status_t zcx_abort(zcx_context_t ctx);  /* bounded, idempotent */
ZCX_API zcx_status_t zcx_rank(zcx_context_t ctx, int* rank);
ZCX_API zcx_status_t zcx_nranks(zcx_context_t ctx, int* nranks);
ZCX_API zcx_status_t zcx_barrier(zcx_context_t ctx);  /* over the bootstrap network */

/* Endpoints: a bidirectional link to one peer, made lazily; provider NULL = default order. */
ZCX_API zcx_status_t zcx_endpoint_get(zcx_context_t ctx, int peer, zcx_endpoint_t* ep);
ZCX_API zcx_status_t zcx_endpoint_provider(zcx_endpoint_t ep, const char** name);

/* Memory registration, optional. Over a provider that registers memory (ib), a transfer on
 * a buffer inside a registered range uses one registration of the range per endpoint, kept
 * until zcx_mem_deregister; any other transfer is registered for its own life only (the
 * caller may free the buffer afterwards), or, up to 16 KiB, copied through memory of the
 * context's own. The range must stay allocated while registered.
 * A range may be registered more than once; each registration is deregistered once. */
ZCX_API zcx_status_t zcx_mem_register(zcx_context_t ctx, void* buf, size_t size,
                                      zcx_memreg_t* reg);
ZCX_API zcx_status_t zcx_mem_deregister(zcx_context_t ctx, zcx_memreg_t reg);

/* Two-sided messages, matched in posting order per endpoint and direction. A receive may
 * be larger than the message; a smaller one fails with ZCX_ERR_INVALID_USAGE. */
ZCX_API zcx_status_t zcx_isend(zcx_endpoint_t ep, const void* buf, size_t size,
                               zcx_request_t* req);
ZCX_API zcx_status_t zcx_irecv(zcx_endpoint_t ep, void* buf, size_t size, zcx_request_t* req);
/* *done = 1 when complete; the request is then freed and *size holds the bytes moved. */
ZCX_API zcx_status_t zcx_test(zcx_request_t req, int* done, size_t* size);
ZCX_API zcx_status_t zcx_wait(zcx_request_t req, size_t* size);  /* bounded by ZCX_TIMEOUT */
ZCX_API zcx_status_t zcx_send(zcx_endpoint_t ep, const void* buf, size_t size);
ZCX_API zcx_status_t zcx_recv(zcx_endpoint_t ep, void* buf, size_t size, size_t* received);

#ifdef __cplusplus
}
#endif
#endif /* ZCX_ZCX_H */
