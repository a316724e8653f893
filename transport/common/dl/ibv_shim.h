// libibverbs loaded at run time. libzcx never links libibverbs, so it loads and runs on
// machines without rdma-core. Only the exported entry points are resolved here; the data
// path verbs (ibv_post_send, ibv_post_recv, ibv_poll_cq) are static inline functions in
// verbs.h that call through the context's ops table, so they work without the shim.
#pragma once

#include "common/status.h"

#include <infiniband/verbs.h>

#include <string>

namespace zcx {

struct IbvApi {
  ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(ibv_device**);
  const char* (*get_device_name)(ibv_device*);
  ibv_context* (*open_device)(ibv_device*);
  int (*close_device)(ibv_context*);
  int (*query_device)(ibv_context*, ibv_device_attr*);
  // The exported compat entry point; use ibv_shim_query_port, which prefers the ops table.
  int (*query_port_compat)(ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*);
  ibv_pd* (*alloc_pd)(ibv_context*);
  int (*dealloc_pd)(ibv_pd*);
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int);
  ibv_mr* (*reg_mr_iova2)(ibv_pd*, void*, size_t, uint64_t, unsigned int);  // may be null
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);  // may be null
  int (*dereg_mr)(ibv_mr*);
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroy_cq)(ibv_cq*);
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*);
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int);
  int (*destroy_qp)(ibv_qp*);
  const char* (*wc_status_str)(ibv_wc_status);
};

// Loads `library` (e.g. "libibverbs.so.1") once per process and returns the resolved table,
// or nullptr with *why describing the failure (library absent, symbol missing). A failed
// load is retried on the next call (possibly with another name); a successful one is kept
// for the life of the process, because contexts opened through it may still exist.
const IbvApi* ibv_shim_load(const std::string& library, std::string* why);
// The loaded table, nullptr before a successful ibv_shim_load.
const IbvApi* ibv_shim();

// ibv_query_port without the verbs.h macro: the context's query_port op when the provider
// has one, else the exported compat function.
int ibv_shim_query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr);
// ibv_reg_mr through ibv_reg_mr_iova2 when libibverbs has it (IBVERBS_1.8).
ibv_mr* ibv_shim_reg_mr(ibv_pd* pd, void* addr, size_t len, unsigned int access);
// Never null: the library's string, or a fallback naming the number.
const char* ibv_shim_wc_status_str(int status);

}  // namespace zcx
