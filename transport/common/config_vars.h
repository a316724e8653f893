// Core ZCX_ variables (provider variables live in each provider's *_config.cc).
#pragma once

#include "common/config.h"

namespace zcx::params {

extern const config::StringParam debug;          // ZCX_DEBUG
extern const config::StringParam debug_subsys;   // ZCX_DEBUG_SUBSYS
extern const config::StringParam debug_file;     // ZCX_DEBUG_FILE
extern const config::DoubleParam timeout;        // ZCX_TIMEOUT (seconds)
extern const config::StringParam providers;      // ZCX_PROVIDERS
extern const config::DoubleParam duplex_wait;    // ZCX_DUPLEX_WAIT (seconds)
extern const config::StringParam socket_ifname;  // ZCX_SOCKET_IFNAME
extern const config::IntParam rank;              // ZCX_RANK
extern const config::IntParam nranks;            // ZCX_NRANKS
extern const config::StringParam root;           // ZCX_ROOT
extern const config::StringParam secret;         // ZCX_SECRET
extern const config::IntParam local_rank;        // ZCX_LOCAL_RANK
extern const config::StringParam run_job_id;     // ZCX_RUN_JOB (set by zcx-run)
extern const config::StringParam net_provider;   // ZCX_NET_PROVIDER (NCCL plugin)

// ZCX_TIMEOUT in milliseconds, at least 1.
int64_t timeout_ms();
// ZCX_DUPLEX_WAIT in nanoseconds, 0 (off) when not positive; at most ZCX_TIMEOUT.
int64_t duplex_wait_ns();

}  // namespace zcx::params
