// ZCX_ variables of the ucx provider. UCX reads its own UCX_* variables (UCX_TLS,
// UCX_NET_DEVICES, ...) itself; zcx adds only what the adapter needs.
#include "ucx/ucx_config.h"

namespace zcx::ucx::params {

const config::StringParam library{"ZCX_UCX_LIBRARY", "libucp.so.0",
    "The UCP library the ucx provider loads at run time. When it cannot be loaded the "
    "provider reports 0 devices and zcx uses its other providers."};
const config::IntParam progress_spin{"ZCX_UCX_PROGRESS_SPIN", 1,
    "ucp_worker_progress calls per test() of the ucx provider.", 1, 1000};
const config::BoolParam use_memh{"ZCX_UCX_USE_MEMH", true,
    "Pass the UCP memory handle of a registered buffer to send/receive operations, so UCX "
    "skips its own registration lookup."};
const config::BoolParam sockaddr{"ZCX_UCX_SOCKADDR", true,
    "Make UCP endpoints through UCX's sockaddr connection manager (a ucp_listener per ctx) "
    "where UCX uses tcp on both sides, else from the peer's worker address (0: always the "
    "worker address). Over tcp this keeps UCX's zero-copy rendezvous lanes in error mode "
    "PEER, which UCX 1.13 drops on worker-address endpoints."};
const config::SizeParam sockaddr_min{"ZCX_UCX_SOCKADDR_MIN", 256 * 1024,
    "With sockaddr endpoints (ZCX_UCX_SOCKADDR), messages from this size on go through them; "
    "smaller ones go through a second, worker-address endpoint to the same peer, whose one "
    "active-message lane was faster below about 256 KiB over tcp on the dev VM."};

}  // namespace zcx::ucx::params
