// ZCX_ variables of the ucx provider (defined in ucx_config.cc).
#pragma once

#include "common/config.h"

namespace zcx::ucx::params {

extern const config::StringParam library;      // ZCX_UCX_LIBRARY
extern const config::IntParam progress_spin;   // ZCX_UCX_PROGRESS_SPIN
extern const config::BoolParam use_memh;       // ZCX_UCX_USE_MEMH
extern const config::BoolParam sockaddr;       // ZCX_UCX_SOCKADDR
extern const config::SizeParam sockaddr_min;   // ZCX_UCX_SOCKADDR_MIN

}  // namespace zcx::ucx::params
