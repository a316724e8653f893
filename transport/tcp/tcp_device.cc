// Device discovery: one device, the interface that ZCX_SOCKET_IFNAME picks.
#include "tcp/tcp.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zcx::tcp {
namespace {

// Link speed in Mb/s from sysfs; loopback and virtual links report none (or -1).
int link_speed_mbps(const std::string& ifname) {
  std::string path = "/sys/class/net/" + ifname + "/speed";
  FILE* f = fopen(path.c_str(), "r");
  int speed = -1;
  if (f != nullptr) {
    if (fscanf(f, "%d", &speed) != 1) speed = -1;
    fclose(f);
  }
  return speed > 0 ? speed : 10000;
}

void pci_path_of(const std::string& ifname, char* out, size_t cap) {
  std::string path = "/sys/class/net/" + ifname + "/device";
  char resolved[PATH_MAX];
  out[0] = '\0';
  if (realpath(path.c_str(), resolved) == nullptr || strlen(resolved) >= cap) return;
  memcpy(out, resolved, strlen(resolved) + 1);
}

}  // namespace

Status device_discover(Context* ctx) {
  ctx->ndev = 0;
  ZCX_TRY(socket_local_address(&ctx->addr, &ctx->ifname));
  ctx->own_addrs = socket_own_addresses();
  ctx->ndev = 1;
  zcx_device_props_t& p = ctx->props;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "%s", ctx->ifname.c_str());
  pci_path_of(ctx->ifname, p.pci_path, sizeof p.pci_path);
  p.speed_mbps = link_speed_mbps(ctx->ifname);
  p.latency_us = 0.0f;  // NCCL's socket transport reports 0 as well: unknown
  p.port = 1;
  p.mem_kinds = ZCX_MEM_HOST;
  p.max_requests = kMaxRequests;
  p.max_recvs = kMaxRecvs;
  p.max_comms = 65536;
  p.inline_bytes = config_inline();
  p.max_message = kMaxMessage;
  p.reg_is_global = 1;
  p.needs_flush = 0;
  ZCX_INFO(kLogTcp, "tcp device %s (%s), %d Mb/s", p.name, ctx->addr.to_string().c_str(),
           p.speed_mbps);
  return Status::kSuccess;
}

}  // namespace zcx::tcp
