// cuda_ipc devices: the CUDA devices the runtime sees. No driver or no GPU is not an error:
// the provider reports 0 devices and says why (zcx-info prints it).
#include "common/log.h"
#include "cuda_ipc/cuda_ipc.h"

#include <cstdio>
#include <cstring>

namespace zcx::cuda_ipc {

Status context_open(Context* ctx) {
  ctx->ndev = cuda_device_count(&ctx->why_none);
  ctx->api = cuda_shim();
  if (ctx->ndev == 0) ZCX_INFO(kLogCuda, "cuda_ipc: no device: %s", ctx->why_none.c_str());
  return Status::kSuccess;
}

namespace {

void pci_path(const CudaApi* api, int dev, char* out, size_t cap) {
  char bus[32] = {};
  if (api->device_get_pci_bus_id(bus, sizeof bus, dev) != cudaSuccess) return;
  for (char* p = bus; *p; ++p) *p = static_cast<char>(*p >= 'A' && *p <= 'F' ? *p - 'A' + 'a' : *p);
  char sys[96];
  std::snprintf(sys, sizeof sys, "/sys/bus/pci/devices/%s", bus);
  if (realpath(sys, out) == nullptr) std::snprintf(out, cap, "%s", sys);
}

}  // namespace

Status fill_props(Context* ctx, int dev, zcx_device_props_t* p) {
  if (dev < 0 || dev >= ctx->ndev)
    return set_error(Status::kInvalidArg, kLogCuda, "cuda_ipc: device %d of %d", dev, ctx->ndev);
  memset(p, 0, sizeof(*p));
  std::snprintf(p->name, sizeof(p->name), "cuda:%d", dev);
  char path[4096] = {};
  pci_path(ctx->api, dev, path, sizeof path);
  std::snprintf(p->pci_path, sizeof(p->pci_path), "%s", path);
  p->speed_mbps = 400000;  // NVLink class; the real figure comes from tests/gpu/run.sh
  p->latency_us = 10.0f;   // a copy-engine launch plus two control packets
  p->mem_kinds = ZCX_MEM_CUDA;
  p->max_requests = kMaxRequests;
  p->max_recvs = 1;
  p->max_comms = 65536;
  p->inline_bytes = 0;
  p->max_message = kMaxMessage;
  p->reg_is_global = 1;
  p->needs_flush = 0;  // the sender's copy has completed before DONE is sent
  return Status::kSuccess;
}

}  // namespace zcx::cuda_ipc
