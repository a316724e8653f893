// Process-wide plugin state: the chosen provider, its context and the device list.
// Discovery happens once per process and is refcounted by the per-communicator init /
// finalize calls; the last finalize releases everything (NCCL then dlcloses us, so nothing
// of ours may outlive it).
#pragma once

#include "api.h"
#include "base/provider.h"
#include "common/status.h"

#include <mutex>
#include <string>
#include <vector>

namespace zcx::plugin {

struct DeviceInfo {
  std::string name;
  std::string pci_path;  // "" when virtual: reported as NULL
  zcx_device_props_t props{};
};

class ProcessState {
 public:
  static ProcessState& get();
  ~ProcessState();

  Status acquire();  // first call chooses the provider and discovers devices
  void release();    // last call finalizes the provider
  // Valid between acquire and the matching release.
  const zcx_provider_ops_t* ops() const { return ops_; }
  void* provider_ctx() const { return pctx_; }
  int ndev() const { return static_cast<int>(devices_.size()); }
  Status properties(int dev, NeutralProps* out);

 private:
  ProcessState() = default;
  Status choose_provider();
  Status try_provider(const zcx_provider_ops_t* ops, std::string* why_not);
  Status discover(const zcx_provider_ops_t* ops, void* pctx, std::string* why_not);
  void shutdown_locked();
  void report_choice(const std::string& why) const;

  std::mutex mu_;
  int refs_ = 0;
  const zcx_provider_ops_t* ops_ = nullptr;
  void* pctx_ = nullptr;
  std::vector<DeviceInfo> devices_;
};

// All providers this plugin can use: the registry's, plus a test-only one when linked in.
std::vector<const zcx_provider_ops_t*> plugin_providers();

}  // namespace zcx::plugin
