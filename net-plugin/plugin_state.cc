#include "plugin_state.h"

#include "base/registry.h"
#include "common/config.h"
#include "plugin_config.h"

#include <unistd.h>

#include <cstring>

// Defined only by tests/plugin's fake provider (linked into the test build of the plugin).
extern "C" const zcx_provider_ops_t* zcx_plugin_test_provider(void)
    __attribute__((weak, visibility("hidden")));

namespace zcx::plugin {
namespace {

constexpr size_t kMaxCollBytes = 512ull << 20;

zcx_provider_init_t make_identity() {
  zcx_provider_init_t self{};
  self.size = sizeof self;
  self.rank = -1;  // NCCL does not tell a net plugin its rank
  self.nranks = -1;
  self.secret = plugin_secret();
  gethostname(self.host, sizeof self.host - 1);
  return self;
}

std::string names_of(const std::vector<DeviceInfo>& devs) {
  std::string out;
  for (const DeviceInfo& d : devs) out += (out.empty() ? "" : ",") + d.name;
  return out;
}

}  // namespace

std::vector<const zcx_provider_ops_t*> plugin_providers() {
  std::vector<const zcx_provider_ops_t*> out = providers_built();
  if (zcx_plugin_test_provider != nullptr && zcx_plugin_test_provider() != nullptr)
    out.push_back(zcx_plugin_test_provider());
  return out;
}

ProcessState& ProcessState::get() {
  // Constructed on first use, so it is destroyed (at dlclose) before the providers' statics.
  static ProcessState state;
  return state;
}

ProcessState::~ProcessState() {
  // Only reached with refs_ > 0 through the pre-v11 adapters, which have no finalize.
  if (refs_ > 0) shutdown_locked();
}

Status ProcessState::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (refs_ == 0) {
    config::warn_unknown_env();
    ZCX_TRY(choose_provider());
  }
  ++refs_;
  return Status::kSuccess;
}

void ProcessState::release() {
  std::lock_guard<std::mutex> lock(mu_);
  if (refs_ == 0) return;
  if (--refs_ == 0) shutdown_locked();
}

void ProcessState::shutdown_locked() {
  if (ops_ != nullptr && pctx_ != nullptr) {
    Status s = static_cast<Status>(ops_->finalize(pctx_));
    if (failed(s)) ZCX_WARN(kLogPlugin, "provider %s finalize failed: %s", ops_->name, last_error());
  }
  ops_ = nullptr;
  pctx_ = nullptr;
  devices_.clear();
  refs_ = 0;
}

Status ProcessState::discover(const zcx_provider_ops_t* ops, void* pctx, std::string* why_not) {
  int n = 0;
  Status s = static_cast<Status>(ops->devices(pctx, &n));
  if (failed(s) || n <= 0) {
    *why_not = failed(s) ? std::string("device query failed: ") + last_error() : "no devices";
    return Status::kNoDevice;
  }
  std::vector<DeviceInfo> devs(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    DeviceInfo& info = devs[static_cast<size_t>(d)];
    s = static_cast<Status>(ops->get_properties(pctx, d, &info.props));
    if (failed(s)) {
      *why_not = std::string("properties of device ") + std::to_string(d) + ": " + last_error();
      return Status::kNoDevice;
    }
    info.props.name[sizeof info.props.name - 1] = '\0';
    info.props.pci_path[sizeof info.props.pci_path - 1] = '\0';
    info.name = info.props.name;
    info.pci_path = info.props.pci_path;
  }
  if (ops->iflush == nullptr)
    for (const DeviceInfo& d : devs)
      if (d.props.mem_kinds & (ZCX_MEM_CUDA | ZCX_MEM_DMABUF))
        ZCX_INFO(kLogPlugin | kLogInit, "%s: GPUDirect not offered to NCCL: provider %s has no "
                 "iflush, so GPU buffers are staged through host memory", d.name.c_str(), ops->name);
  devices_ = std::move(devs);
  return Status::kSuccess;
}

Status ProcessState::try_provider(const zcx_provider_ops_t* ops, std::string* why_not) {
  zcx_provider_init_t self = make_identity();
  void* pctx = nullptr;
  Status s = static_cast<Status>(ops->init(&self, &pctx));
  if (failed(s)) {
    *why_not = std::string("init failed: ") + last_error();
    return s;
  }
  s = discover(ops, pctx, why_not);
  if (failed(s)) {
    Status f = static_cast<Status>(ops->finalize(pctx));
    (void)f;  // the discovery failure is the error worth reporting
    return s;
  }
  ops_ = ops;
  pctx_ = pctx;
  return Status::kSuccess;
}

void ProcessState::report_choice(const std::string& why) const {
  ZCX_INFO(kLogPlugin | kLogInit, "using provider %s with %d device(s) [%s]: %s", ops_->name,
           ndev(), names_of(devices_).c_str(), why.c_str());
}

Status ProcessState::choose_provider() {
  std::string wanted = net_provider.get();
  bool automatic = wanted.empty() || wanted == "auto";
  std::vector<const zcx_provider_ops_t*> all = plugin_providers();
  std::string tried;
  auto attempt = [&](const zcx_provider_ops_t* ops) {
    std::string why_not;
    if (ok(try_provider(ops, &why_not))) return true;
    tried += std::string(tried.empty() ? "" : "; ") + ops->name + ": " + why_not;
    return false;
  };
  std::vector<std::string> order;
  if (automatic) order = {"ib", "tcp"};
  else order = {wanted};
  for (const std::string& name : order) {
    bool built = false;
    for (const zcx_provider_ops_t* ops : all) built |= name == ops->name;
    if (!built) tried += std::string(tried.empty() ? "" : "; ") + name + ": not in this build";
    for (const zcx_provider_ops_t* ops : all) {
      if (name != ops->name || !attempt(ops)) continue;
      report_choice(automatic ? "ZCX_NET_PROVIDER=auto takes the first of ib,tcp with a device" +
                                    (tried.empty() ? std::string() : " (" + tried + ")")
                              : "ZCX_NET_PROVIDER=" + wanted);
      return Status::kSuccess;
    }
  }
  std::string built;
  for (const zcx_provider_ops_t* ops : all) built += std::string(built.empty() ? "" : ",") + ops->name;
  return set_error(Status::kNoDevice, kLogPlugin | kLogInit,
                   "no usable provider for ZCX_NET_PROVIDER=%s (built: %s; %s); NCCL falls back "
                   "to its internal IB/Socket nets unless NCCL_NET=zcx pins this plugin",
                   wanted.c_str(), built.empty() ? "none" : built.c_str(),
                   tried.c_str());
}

Status ProcessState::properties(int dev, NeutralProps* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dev < 0 || dev >= ndev())
    return set_error(Status::kInvalidArg, kLogPlugin, "device %d out of range (0..%d)", dev,
                     ndev() - 1);
  DeviceInfo& info = devices_[static_cast<size_t>(dev)];
  const zcx_device_props_t& p = info.props;
  *out = NeutralProps{};
  out->name = info.name.data();
  out->pci_path = info.pci_path.empty() ? nullptr : info.pci_path.data();
  out->guid = p.guid != 0 ? p.guid : static_cast<uint64_t>(dev);  // NCCL: equal guid = same port
  out->ptr_support = static_cast<int>(p.mem_kinds & (NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF));
  // Without iflush, GPUDirect receives could be read by the GPU before the NIC's writes land
  // (pre-Hopper): advertise host memory only, so NCCL stages GPU data through host buffers.
  if (ops_->iflush == nullptr) out->ptr_support &= NCCL_PTR_HOST;
  out->reg_is_global = p.reg_is_global;
  out->force_flush = 0;  // NCCL decides when GPU receives need iflush
  out->speed_mbps = p.speed_mbps;
  out->port = p.port;
  out->latency_us = p.latency_us;
  out->max_comms = p.max_comms > 0 ? p.max_comms : 65536;
  out->max_recvs = p.max_recvs < 1 ? 1 : (p.max_recvs > kMaxRecvsCap ? kMaxRecvsCap : p.max_recvs);
  out->dev = dev;
  size_t max_msg = p.max_message > 0 ? p.max_message : (1ull << 30);
  out->max_p2p_bytes = max_msg < NCCL_MAX_NET_SIZE_BYTES ? max_msg : NCCL_MAX_NET_SIZE_BYTES;
  out->max_coll_bytes = max_msg < kMaxCollBytes ? max_msg : kMaxCollBytes;
  return Status::kSuccess;
}

}  // namespace zcx::plugin
