/* The provider contract (docs/ARCHITECTURE.md, DESIGN §4): one small C ops table per
 * transport. It mirrors the NCCL net API so the plugin is a thin adapter, and it is plain C
 * so a provider could later live in its own .so.
 *
 * Rules every provider keeps:
 *  - listen/connect/accept never block: connect and accept return ZCX_SUCCESS with a NULL
 *    comm until the connection is up; connect never waits for the peer to call accept.
 *  - A connection is one-directional: a send comm (connector) feeds a recv comm (acceptor).
 *    Sends and receives match in posting order; tags only pick the buffer of a grouped
 *    receive that a send lands in. A provider may let the acceptor send back over the same
 *    connection (connect_reverse/accept_reverse): one duplex link per pair of ranks.
 *  - isend/irecv may return ZCX_SUCCESS with *request == NULL: "retry later".
 *  - test() drives progress. A request whose peer is dead, closed the connection, or made no
 *    progress for ZCX_TIMEOUT fails with an error naming the peer (rank, host).
 *  - Optional operations are NULL in the table; callers treat NULL as ZCX_ERR_UNSUPPORTED.
 *  - Every field read from the wire is bounds-checked; nothing from a peer can crash us. */
#ifndef ZCX_BASE_PROVIDER_H
#define ZCX_BASE_PROVIDER_H

#include <zcx/zcx.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZCX_HANDLE_BYTES 128       /* = NCCL_NET_HANDLE_MAXSIZE */
#define ZCX_PROVIDER_ABI_VERSION 2
#define ZCX_HOST_NAME_BYTES 64

/* Memory kinds: device capability bits and the `kind` argument of reg_mr. Values match
 * NCCL_PTR_HOST/CUDA/DMABUF. */
enum { ZCX_MEM_HOST = 0x1, ZCX_MEM_CUDA = 0x2, ZCX_MEM_DMABUF = 0x4 };

/* Provider flags. */
enum {
  ZCX_PROVIDER_LOCAL_ONLY = 0x1,  /* reaches only peers on the same host (shm, cuda_ipc) */
  ZCX_PROVIDER_NEEDS_REG = 0x2,   /* isend/irecv need an mhandle from reg_mr */
  ZCX_PROVIDER_DEVICE_ONLY = 0x4, /* moves GPU memory only (cuda_ipc): used when asked for by
                                     name, never picked for host traffic */
};

/* Wire ids of providers, carried in handles (docs/WIRE.md). */
enum {
  ZCX_PROVIDER_ID_TCP = 1,
  ZCX_PROVIDER_ID_SHM = 2,
  ZCX_PROVIDER_ID_IB = 3,
  ZCX_PROVIDER_ID_UCX = 4,
  ZCX_PROVIDER_ID_CUDA_IPC = 5,
};

typedef struct {
  char name[64];
  char pci_path[256];     /* realpath of the sysfs device, "" when none */
  uint64_t guid;
  int speed_mbps;
  float latency_us;
  int port;
  uint32_t mem_kinds;     /* ZCX_MEM_* */
  int max_requests;       /* requests in flight per comm, per grouped-receive slot */
  int max_recvs;          /* largest n of a grouped irecv */
  int max_comms;
  size_t inline_bytes;    /* messages up to this size go eagerly */
  size_t max_message;     /* largest single isend */
  int reg_is_global;      /* registrations are not tied to a comm */
  int needs_flush;        /* receives into GPU memory need iflush */
} zcx_device_props_t;

/* Who this process is. Peers learn it in the connection handshake and it names them in
 * errors. rank is -1 when unknown (the NCCL plugin). */
typedef struct {
  size_t size;            /* sizeof(zcx_provider_init_t) */
  int rank;
  int nranks;
  uint64_t secret;        /* job secret: every connection handshake must present it */
  char host[ZCX_HOST_NAME_BYTES];
} zcx_provider_init_t;

/* The identity of a connected peer, from its handshake. */
typedef struct {
  int rank;
  int pid;
  char host[ZCX_HOST_NAME_BYTES];
} zcx_peer_info_t;

typedef struct zcx_provider_ops {
  size_t size;            /* sizeof(zcx_provider_ops_t) */
  uint32_t abi_version;   /* ZCX_PROVIDER_ABI_VERSION */
  const char* name;       /* "tcp", "shm", ... */
  uint8_t id;             /* ZCX_PROVIDER_ID_* */
  uint32_t flags;         /* ZCX_PROVIDER_* */

  /* One ctx per context/communicator; device discovery is process-wide and refcounted. */
  zcx_status_t (*init)(const zcx_provider_init_t* self, void** ctx);
  zcx_status_t (*finalize)(void* ctx);
  zcx_status_t (*devices)(void* ctx, int* ndev);  /* 0 devices is not an error */
  zcx_status_t (*get_properties)(void* ctx, int dev, zcx_device_props_t* props);

  /* handle: ZCX_HANDLE_BYTES bytes written by listen, read by connect. */
  zcx_status_t (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  zcx_status_t (*connect)(void* ctx, int dev, const void* handle, void** send_comm);
  zcx_status_t (*accept)(void* listen_comm, void** recv_comm);
  zcx_status_t (*peer_info)(void* comm, zcx_peer_info_t* info);

  /* comm: a send or recv comm. mhandle may be NULL for host memory when the provider does
   * not set ZCX_PROVIDER_NEEDS_REG. */
  zcx_status_t (*reg_mr)(void* comm, void* data, size_t size, int kind, void** mhandle);
  zcx_status_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int kind,
                                uint64_t offset, int fd, void** mhandle); /* optional */
  zcx_status_t (*dereg_mr)(void* comm, void* mhandle);

  zcx_status_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  zcx_status_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** request);
  zcx_status_t (*iflush)(void* recv_comm, int n, void** data, size_t* sizes, void** mhandles,
                         void** request); /* optional */
  /* done=1 frees the request; sizes gets one entry per buffer (1 for a send). A request
   * that completed reports done even when the comm failed after it (in the same call, on a
   * later message): the failure stays on the comm and reaches the next request tested. */
  zcx_status_t (*test)(void* request, int* done, size_t* sizes);

  /* Close with requests in flight is allowed: they are dropped. */
  zcx_status_t (*close_send)(void* send_comm);
  zcx_status_t (*close_recv)(void* recv_comm);
  zcx_status_t (*close_listen)(void* listen_comm);

  /* Optional: the other direction of an accepted connection. connect_reverse makes a send
   * comm to the peer that connected recv_comm, over that connection (NULL while in
   * progress; once per connection). The connector's side learns of it by polling
   * accept_reverse on its send comm, which yields the matching recv comm (NULL until the
   * peer has called connect_reverse). Neither blocks; both are bounded by ZCX_TIMEOUT like
   * the rest. A caller that uses them must make sure only one side of a pair reverses. */
  zcx_status_t (*connect_reverse)(void* recv_comm, void** send_comm);
  zcx_status_t (*accept_reverse)(void* send_comm, void** recv_comm);
} zcx_provider_ops_t;

#ifdef __cplusplus
}
#endif
#endif /* ZCX_BASE_PROVIDER_H */
