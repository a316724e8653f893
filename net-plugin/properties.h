// Copies the neutral properties into a version's struct (v8 has a subset of v9's fields;
// v9, v10 and v11 share their leading fields).
#pragma once

#include "api.h"

namespace zcx::plugin {

template <typename Props>
void fill_common_props(const NeutralProps& n, Props* p) {
  p->name = n.name;
  p->pciPath = n.pci_path;
  p->guid = n.guid;
  p->ptrSupport = n.ptr_support;
  p->regIsGlobal = n.reg_is_global;
  p->speed = n.speed_mbps;
  p->port = n.port;
  p->latency = n.latency_us;
  p->maxComms = n.max_comms;
  p->maxRecvs = n.max_recvs;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
}

// v9 and later: flush hint, the (single) physical device behind this one, size limits.
template <typename Props>
void fill_v9_props(const NeutralProps& n, Props* p) {
  fill_common_props(n, p);
  p->forceFlush = n.force_flush;
  p->vProps.ndevs = 1;
  for (int& d : p->vProps.devs) d = 0;
  p->vProps.devs[0] = n.dev;
  p->maxP2pBytes = n.max_p2p_bytes;
  p->maxCollBytes = n.max_coll_bytes;
}

}  // namespace zcx::plugin
