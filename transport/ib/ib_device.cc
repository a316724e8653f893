// Device discovery: every ACTIVE port with an IB or Ethernet (RoCE) link layer, filtered by
// ZCX_IB_HCA. Process-wide and refcounted: the first init opens, the last finalize closes.
#include "ib/ib.h"

#include "common/log.h"

#include <arpa/inet.h>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace zcx::ib {
namespace {

struct Registry {
  std::mutex mu;
  int refs = 0;
  std::vector<std::unique_ptr<Device>> devs;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: devices may outlive statics
  return *r;
}

// ZCX_IB_HCA grammar as NCCL_IB_HCA: [^][=]name[:port],...; prefix match unless '='.
bool hca_selected(const std::string& spec_in, const std::string& dev, int port) {
  if (spec_in.empty()) return true;
  std::string spec = spec_in;
  bool exclude = spec[0] == '^';
  if (exclude) spec.erase(0, 1);
  bool exact = !spec.empty() && spec[0] == '=';
  if (exact) spec.erase(0, 1);
  bool hit = false;
  size_t pos = 0;
  while (pos <= spec.size() && !hit) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    int want_port = -1;
    if (size_t colon = item.find(':'); colon != std::string::npos) {
      want_port = atoi(item.c_str() + colon + 1);
      item.resize(colon);
    }
    bool name_ok = exact ? item == dev : dev.compare(0, item.size(), item) == 0;
    hit = name_ok && (want_port < 0 || want_port == port);
  }
  return exclude ? !hit : hit;
}

int lanes(uint8_t width) {
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 1;
  }
}

// Per-lane rate in Mb/s from active_speed (SDR .. NDR; this rdma-core has no XDR field).
int lane_mbps(const ibv_port_attr& a) {
  switch (a.active_speed) {
    case 1: return 2500;
    case 2: return 5000;
    case 4: return 10000;
    case 8: return 10000;
    case 16: return 14000;
    case 32: return 25000;
    case 64: return 50000;
    case 128: return 100000;
    default: return 10000;
  }
}

std::string read_sysfs(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

bool gid_is_zero(const ibv_gid& g) {
  static const uint8_t zero[16] = {};
  return memcmp(g.raw, zero, 16) == 0;
}
bool gid_is_link_local(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }
bool gid_is_v4_mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g.raw, prefix, 12) == 0;
}

// RoCE: ZCX_IB_GID_INDEX wins; else prefer RoCE v2 + IPv4-mapped, never link-local.
Status choose_gid(const IbvApi* api, Device* d) {
  if (d->port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
    d->gid_index = 0;
    if (api->query_gid(d->ctx, d->port, 0, &d->gid) != 0) memset(&d->gid, 0, sizeof d->gid);
    return Status::kSuccess;
  }
  int forced = static_cast<int>(params::gid_index.get());
  if (forced >= 0) {
    if (api->query_gid(d->ctx, d->port, forced, &d->gid) != 0 || gid_is_zero(d->gid))
      return set_error(Status::kNoDevice, kLog,
                       "ib: ZCX_IB_GID_INDEX=%d is not a valid GID on %s port %d (the table "
                       "has %d entries; see /sys/class/infiniband/%s/ports/%d/gids)",
                       forced, d->name.c_str(), d->port, d->port_attr.gid_tbl_len,
                       d->name.c_str(), d->port);
    d->gid_index = forced;
    return Status::kSuccess;
  }
  int best = -1, best_score = -1;
  for (int i = 0; i < d->port_attr.gid_tbl_len && i < 1024; ++i) {
    ibv_gid g;
    if (api->query_gid(d->ctx, d->port, i, &g) != 0 || gid_is_zero(g) || gid_is_link_local(g))
      continue;
    std::string type = read_sysfs("/sys/class/infiniband/" + d->name + "/ports/" +
                                  std::to_string(d->port) + "/gid_attrs/types/" +
                                  std::to_string(i));
    int score = (gid_is_v4_mapped(g) ? 2 : 0) + (type.find("v2") != std::string::npos ? 1 : 0);
    if (score > best_score) {
      best = i, best_score = score;
      d->gid = g;
    }
  }
  if (best < 0)
    return set_error(Status::kNoDevice, kLog,
                     "ib: %s port %d has no usable RoCE GID (only empty or link-local "
                     "entries); give the netdev an IP address or set ZCX_IB_GID_INDEX",
                     d->name.c_str(), d->port);
  d->gid_index = best;
  return Status::kSuccess;
}

std::string pci_path_of(const std::string& name) {
  std::string link = "/sys/class/infiniband/" + name + "/device";
  char buf[PATH_MAX];
  if (realpath(link.c_str(), buf) == nullptr) return std::string();
  return buf;
}

// Opens one Device per ACTIVE port of `ibdev` that the filter keeps.
void open_ports(const IbvApi* api, ibv_device* ibdev, std::vector<std::unique_ptr<Device>>* out) {
  std::string name = api->get_device_name(ibdev);
  ibv_context* probe = api->open_device(ibdev);
  if (probe == nullptr) {
    ZCX_INFO(kLog, "ib: cannot open %s: %s (skipped)", name.c_str(), errno_text(errno));
    return;
  }
  ibv_device_attr da{};
  int nports = api->query_device(probe, &da) == 0 ? da.phys_port_cnt : 0;
  api->close_device(probe);
  std::string spec = params::hca.get();
  for (int p = 1; p <= nports; ++p) {
    if (!hca_selected(spec, name, p)) continue;
    auto d = std::make_unique<Device>();
    d->name = name;
    d->port = p;
    d->ctx = api->open_device(ibdev);
    if (d->ctx == nullptr || ibv_shim_query_port(d->ctx, static_cast<uint8_t>(p), &d->port_attr))
      continue;
    const ibv_port_attr& a = d->port_attr;
    if (a.state != IBV_PORT_ACTIVE ||
        (a.link_layer != IBV_LINK_LAYER_INFINIBAND && a.link_layer != IBV_LINK_LAYER_ETHERNET)) {
      ZCX_INFO(kLog, "ib: %s port %d skipped: state %d, link layer %d", name.c_str(), p,
               a.state, a.link_layer);
      continue;
    }
    if (!ok(choose_gid(api, d.get()))) continue;
    d->pd = api->alloc_pd(d->ctx);
    if (d->pd == nullptr) {
      ZCX_WARN(kLog, "ib: ibv_alloc_pd on %s failed: %s (device skipped)", name.c_str(),
               errno_text(errno));
      continue;
    }
    d->guid = be64toh(da.node_guid);
    d->max_qp = da.max_qp;
    d->max_qp_wr = da.max_qp_wr;
    d->max_cqe = da.max_cqe;
    d->speed_mbps = lanes(a.active_width) * lane_mbps(a);
    d->pci_path = pci_path_of(name);
    d->mem_kinds = ZCX_MEM_HOST | cuda_mem_kinds(d.get());
    ZCX_INFO(kLog, "ib: %s port %d: %s, %d Mb/s, MTU %d, GID[%d] %s", name.c_str(), p,
             a.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", d->speed_mbps,
             128 << a.active_mtu, d->gid_index, gid_string(d->gid).c_str());
    out->push_back(std::move(d));
  }
}

void discover(Registry& r) {
  std::string why;
  const IbvApi* api = ibv_shim_load(params::library.get(), &why);
  if (api == nullptr) {
    ZCX_INFO(kLog, "ib: no RDMA devices: cannot load %s (%s)", params::library.get().c_str(),
             why.c_str());
    return;
  }
  int n = 0;
  ibv_device** list = api->get_device_list(&n);
  if (list == nullptr || n == 0) {
    ZCX_INFO(kLog, "ib: no RDMA devices found%s", list ? "" : " (ibv_get_device_list failed)");
    if (list) api->free_device_list(list);
    return;
  }
  for (int i = 0; i < n; ++i) open_ports(api, list[i], &r.devs);
  api->free_device_list(list);
  if (r.devs.empty())
    ZCX_INFO(kLog, "ib: no RDMA devices usable: %d found, none ACTIVE and selected by "
             "ZCX_IB_HCA='%s'", n, params::hca.get().c_str());
}

}  // namespace

Device::~Device() {
  const IbvApi* api = ibv_shim();
  if (api == nullptr) return;
  for (MrEntry* e : mrs) {  // registrations the user never released
    api->dereg_mr(e->mr);
    delete e;
  }
  if (pd) api->dealloc_pd(pd);
  if (ctx) api->close_device(ctx);
}

Status devices_acquire(std::vector<Device*>* out) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.refs++ == 0) discover(r);
  out->clear();
  for (auto& d : r.devs) out->push_back(d.get());
  return Status::kSuccess;
}

void devices_release() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.refs > 0 && --r.refs == 0) r.devs.clear();
}

std::string gid_string(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid.raw, buf, sizeof buf);
  return buf;
}

}  // namespace zcx::ib
