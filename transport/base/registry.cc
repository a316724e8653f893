#include "base/registry.h"

#include "common/config_vars.h"
#include "common/log.h"

#include <cstring>

// Each provider defines one of these. They are weak (and hidden: resolved inside the
// library being linked, never against another loaded object, e.g. when zcx_core is linked
// into the NCCL plugin) so a build without a provider (its
// dependency absent, or the provider not written yet) links and simply lacks it.
extern "C" {
const zcx_provider_ops_t* zcx_provider_tcp(void) __attribute__((weak, visibility("hidden")));
const zcx_provider_ops_t* zcx_provider_shm(void) __attribute__((weak, visibility("hidden")));
const zcx_provider_ops_t* zcx_provider_ib(void) __attribute__((weak, visibility("hidden")));
const zcx_provider_ops_t* zcx_provider_ucx(void) __attribute__((weak, visibility("hidden")));
const zcx_provider_ops_t* zcx_provider_cuda_ipc(void) __attribute__((weak, visibility("hidden")));
}

namespace zcx {

namespace {

// Every provider zcx has, built here or not (a weak getter is null where it is not): a name
// outside this table is a mistake in ZCX_PROVIDERS (warned), a name in it that this build
// lacks is not (the default names them all).
struct BuiltIn {
  const char* name;
  const zcx_provider_ops_t* (*get)(void);
};
const BuiltIn kBuiltIns[] = {{"shm", zcx_provider_shm}, {"cuda_ipc", zcx_provider_cuda_ipc},
                             {"ib", zcx_provider_ib},   {"ucx", zcx_provider_ucx},
                             {"tcp", zcx_provider_tcp}};

bool provider_known(const std::string& name) {
  for (const BuiltIn& b : kBuiltIns)
    if (name == b.name) return true;
  return false;
}

std::string provider_names() {
  std::string out;
  for (const BuiltIn& b : kBuiltIns) out += std::string(out.empty() ? "" : ", ") + b.name;
  return out;
}

}  // namespace

std::vector<const zcx_provider_ops_t*> providers_built() {
  std::vector<const zcx_provider_ops_t*> out;
  for (const BuiltIn& b : kBuiltIns) {
    if (b.get == nullptr) continue;
    const zcx_provider_ops_t* ops = b.get();
    if (ops != nullptr && ops->abi_version == ZCX_PROVIDER_ABI_VERSION) out.push_back(ops);
  }
  return out;
}

const zcx_provider_ops_t* provider_find(const std::string& name) {
  for (const zcx_provider_ops_t* ops : providers_built())
    if (name == ops->name) return ops;
  return nullptr;
}

std::vector<const zcx_provider_ops_t*> providers_selected() {
  std::string list = params::providers.get();
  std::vector<const zcx_provider_ops_t*> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string name = list.substr(pos, comma - pos);
    pos = comma + 1;
    if (name.empty()) continue;
    const zcx_provider_ops_t* ops = provider_find(name);
    if (ops == nullptr && !provider_known(name)) {
      ZCX_WARN(kLogInit, "ZCX_PROVIDERS names '%s', which is no zcx provider (%s); ignored",
               name.c_str(), provider_names().c_str());
      continue;
    }
    if (ops == nullptr) {
      ZCX_INFO(kLogInit, "ZCX_PROVIDERS names '%s', which this build does not have",
               name.c_str());
      continue;
    }
    out.push_back(ops);
  }
  return out;
}

}  // namespace zcx
