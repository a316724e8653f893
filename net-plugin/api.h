// The version-neutral plugin API. Each interface_vN.cc adapts NCCL's vN table onto these
// functions; they are the firewall: no exception escapes (caught and logged as
// ncclInternalError), every zcx::Status becomes an ncclResult_t (to_nccl), and every pointer
// NCCL hands in is checked before use.
#pragma once

#include "nccl/net_abi.h"

#include <cstddef>
#include <cstdint>

namespace zcx::plugin {

inline constexpr const char* kPluginName = "zcx";
inline constexpr int kMaxRecvsCap = 8;  // NCCL groups at most 8 receives per irecv

// Superset of every version's properties; adapters copy the fields their version has.
struct NeutralProps {
  char* name = nullptr;
  char* pci_path = nullptr;  // nullptr for virtual devices
  uint64_t guid = 0;
  int ptr_support = NCCL_PTR_HOST;
  int reg_is_global = 0;
  int force_flush = 0;
  int speed_mbps = 0;
  int port = 0;
  float latency_us = 0;
  int max_comms = 0;
  int max_recvs = 1;
  int dev = 0;
  size_t max_p2p_bytes = 0;
  size_t max_coll_bytes = 0;
};

// comm_id is 0 and traffic_class undefined for the pre-v11 adapters.
ncclResult_t api_init(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger);
ncclResult_t api_finalize(void* ctx);
ncclResult_t api_devices(int* ndev);
ncclResult_t api_get_properties(int dev, NeutralProps* props);
ncclResult_t api_listen(void* ctx, int dev, void* handle, void** listen_comm);
ncclResult_t api_connect(void* ctx, int dev, void* handle, void** send_comm);
ncclResult_t api_accept(void* listen_comm, void** recv_comm);
ncclResult_t api_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t api_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
ncclResult_t api_dereg_mr(void* comm, void* mhandle);
ncclResult_t api_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                       void** request);
ncclResult_t api_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                       void** mhandles, void** request);
ncclResult_t api_iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                        void** request);
ncclResult_t api_test(void* request, int* done, int* sizes);
ncclResult_t api_close_send(void* send_comm);
ncclResult_t api_close_recv(void* recv_comm);
ncclResult_t api_close_listen(void* listen_comm);

// The process-wide context used by the pre-v11 adapters (created by their single init).
void* api_legacy_ctx();
ncclResult_t api_legacy_init(ncclDebugLogger_t logger);

}  // namespace zcx::plugin
