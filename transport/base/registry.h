// Built-in providers and their selection by ZCX_PROVIDERS.
#pragma once

#include "base/provider.h"

#include <string>
#include <vector>

namespace zcx {

// Every provider compiled into this build, in a fixed order.
std::vector<const zcx_provider_ops_t*> providers_built();
// The built providers named in ZCX_PROVIDERS, in that order (unknown names warn).
std::vector<const zcx_provider_ops_t*> providers_selected();
const zcx_provider_ops_t* provider_find(const std::string& name);

}  // namespace zcx
