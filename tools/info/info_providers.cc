// zcx-info: build features and providers with their devices.
#include "info.h"

#include "base/provider.h"
#include "base/registry.h"
#include "common/log.h"
#include "common/socket.h"

#include <zcx/config.h>
#include <zcx/zcx.h>
#if ZCX_HAVE_CUDA
#include "common/dl/cuda_shim.h"
#endif

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace zcx::info {
namespace {

// A provider that finds no device says why in the log ("ib: no RDMA devices found ...").
// While one looks for devices, its log lines are kept instead of printed, and the last one
// is shown beside "no device"; warnings still go to stderr. Not when the user set
// ZCX_DEBUG: their log shows it then.
std::string g_last_line;

void keep_last_line(LogLevel level, uint32_t subsys, const char*, int, const char* message) {
  if (level <= LogLevel::kWarn)
    std::fprintf(stderr, "zcx WARN %s: %s\n", log_subsys_name(subsys), message);
  if (level <= LogLevel::kInfo) g_last_line = message;
}

// ": <reason>" from the kept line, without the provider's name and "no device: " in front.
std::string why_no_device(const std::string& provider) {
  std::string reason = g_last_line;
  for (const std::string& lead : {provider + ": ", std::string("no device: ")})
    if (reason.rfind(lead, 0) == 0) reason.erase(0, lead.size());
  return reason.empty() ? "" : ": " + reason;
}

class DiscoveryLog {
 public:
  DiscoveryLog() : keep_(std::getenv("ZCX_DEBUG") == nullptr), level_(log_level()) {
    g_last_line.clear();
    if (!keep_) return;
    log_set_sink(keep_last_line);
    log_set_level(LogLevel::kInfo);
  }
  ~DiscoveryLog() { stop(); }
  void stop() {
    if (!keep_) return;
    keep_ = false;
    log_set_sink(nullptr);
    log_set_level(level_);
  }

 private:
  bool keep_;
  LogLevel level_;  // restored afterwards
};

std::string mem_kinds(uint32_t kinds) {
  std::string out;
  if (kinds & ZCX_MEM_HOST) out += "host ";
  if (kinds & ZCX_MEM_CUDA) out += "cuda ";
  if (kinds & ZCX_MEM_DMABUF) out += "dmabuf ";
  if (out.empty()) return "none";
  out.pop_back();
  return out;
}

std::string flags_text(uint32_t flags) {
  std::string out;
  if (flags & ZCX_PROVIDER_LOCAL_ONLY) out += "local-only ";
  if (flags & ZCX_PROVIDER_DEVICE_ONLY) out += "device-only ";
  if (flags & ZCX_PROVIDER_NEEDS_REG) out += "needs-registration ";
  if (out.empty()) return "none";
  out.pop_back();
  return out;
}

void print_features() {
  std::printf("zcx %s\n", zcx_version_string());
  std::printf("build features: verbs=%s ucx=%s cuda=%s mpi=%s\n", ZCX_HAVE_VERBS ? "yes" : "no",
              ZCX_HAVE_UCX ? "yes" : "no", ZCX_HAVE_CUDA ? "yes" : "no",
              ZCX_HAVE_MPI ? "yes" : "no");
#if ZCX_HAVE_CUDA
  std::printf("cuda: %s\n", cuda_shim_describe().c_str());
#else
  std::printf("cuda: not built (ZCX_WITH_CUDA=OFF or no toolkit)\n");
#endif
}

void print_device(const zcx_provider_ops_t* ops, void* ctx, int dev) {
  zcx_device_props_t p{};
  zcx_status_t s = ops->get_properties(ctx, dev, &p);
  if (s != ZCX_SUCCESS) {
    std::printf("  device %d: properties unavailable: %s (%s)\n", dev, zcx_status_string(s),
                zcx_get_last_error());
    return;
  }
  std::printf("  device %d: %s\n", dev, p.name);
  std::printf("    pci path       %s\n", p.pci_path[0] ? p.pci_path : "-");
  std::printf("    guid           0x%016llx  port %d\n", static_cast<unsigned long long>(p.guid),
              p.port);
  std::printf("    speed          %d Mb/s  latency %.2f us\n", p.speed_mbps, p.latency_us);
  std::printf("    memory kinds   %s\n", mem_kinds(p.mem_kinds).c_str());
  std::printf("    max requests   %d  max grouped recvs %d  max comms %d\n", p.max_requests,
              p.max_recvs, p.max_comms);
  std::printf("    inline bytes   %zu  max message %zu\n", p.inline_bytes, p.max_message);
  std::printf("    global reg     %s  needs flush %s\n", p.reg_is_global ? "yes" : "no",
              p.needs_flush ? "yes" : "no");
}

void print_provider(const zcx_provider_ops_t* ops) {
  std::printf("\nprovider %s (wire id %u, flags %s)\n", ops->name, ops->id,
              flags_text(ops->flags).c_str());
  zcx_provider_init_t self{};
  self.size = sizeof self;
  self.rank = 0;
  self.nranks = 1;
  std::snprintf(self.host, sizeof self.host, "%s", local_host_name().c_str());
  void* ctx = nullptr;
  DiscoveryLog discovery;
  zcx_status_t s = ops->init(&self, &ctx);
  if (s != ZCX_SUCCESS) {
    std::printf("  not usable here: %s (%s)\n", zcx_status_string(s), zcx_get_last_error());
    return;
  }
  int ndev = 0;
  s = ops->devices(ctx, &ndev);
  discovery.stop();
  if (s != ZCX_SUCCESS)
    std::printf("  device discovery failed: %s (%s)\n", zcx_status_string(s), zcx_get_last_error());
  else if (ndev == 0)
    std::printf("  no device%s\n", why_no_device(ops->name).c_str());
  for (int dev = 0; s == ZCX_SUCCESS && dev < ndev; ++dev) print_device(ops, ctx, dev);
  if (ops->finalize(ctx) != ZCX_SUCCESS)
    std::printf("  finalize failed: %s\n", zcx_get_last_error());
}

}  // namespace

int print_build_and_providers() {
  print_features();
  std::vector<const zcx_provider_ops_t*> providers = providers_built();
  std::printf("providers built:");
  for (const zcx_provider_ops_t* ops : providers) std::printf(" %s", ops->name);
  std::printf("%s\n", providers.empty() ? " none" : "");
  std::printf("providers selected (ZCX_PROVIDERS order):");
  std::vector<const zcx_provider_ops_t*> selected = providers_selected();
  for (const zcx_provider_ops_t* ops : selected) std::printf(" %s", ops->name);
  std::printf("%s\n", selected.empty() ? " none" : "");
  for (const zcx_provider_ops_t* ops : providers) print_provider(ops);
  return 0;
}

}  // namespace zcx::info
