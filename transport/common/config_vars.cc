#include "common/config_vars.h"

#include <algorithm>
#include <cmath>

namespace zcx::params {

const config::StringParam debug{"ZCX_DEBUG", "WARN",
    "Log level: NONE, VERSION, WARN, INFO or TRACE, in any case (anything else: WARN, said on "
    "stderr)."};
const config::StringParam debug_subsys{"ZCX_DEBUG_SUBSYS", "ALL",
    "Comma list of subsystems to log (INIT,NET,SHM,IB,COLL,TUNING,BOOTSTRAP,TCP,UCX,CUDA,"
    "PLUGIN,ENV,MEM,ALL); a leading ^ excludes the listed ones."};
const config::StringParam debug_file{"ZCX_DEBUG_FILE", "",
    "Write the log to this file instead of stderr; %h host, %p pid, %r rank (before the "
    "bootstrap: the launcher's, read as zcx_init_from_env reads it; x when none)."};
const config::DoubleParam timeout{"ZCX_TIMEOUT", 300.0,
    "Seconds any wait may last without progress before it fails with a timeout that names "
    "the peer. Bounds bootstrap, connection set-up and every transfer.", 0.001, 1e9};
const config::StringParam providers{"ZCX_PROVIDERS", "shm,ib,ucx,tcp,cuda_ipc",
    "Provider preference order; a provider is used for a peer when it is built, has a "
    "device and can reach the peer. Names: tcp, shm, ib, ucx, cuda_ipc (another name is "
    "warned about and ignored). cuda_ipc moves GPU memory only: stream-ordered collectives "
    "ask for it by name, host traffic never takes it."};
const config::DoubleParam duplex_wait{"ZCX_DUPLEX_WAIT", 1.0,
    "Seconds the higher rank of a pair waits for the lower rank's connection in order to "
    "send back over it, where the provider can (tcp): one two-way connection per pair, as "
    "UCX and Open MPI have, saves a ping-pong the extra acknowledgements of two one-way "
    "ones. Past the wait it connects on its own. 0: one connection per direction.", 0, 1e9};
const config::StringParam socket_ifname{"ZCX_SOCKET_IFNAME", "",
    "Network interface(s) for sockets: a prefix list such as eth,ib; ^docker excludes; "
    "=eth0 matches exactly. Default: the first up, non-loopback interface, else loopback."};
const config::IntParam rank{"ZCX_RANK", -1, "This process's rank (set by zcx-run).", -1,
    1 << 24};
const config::IntParam nranks{"ZCX_NRANKS", -1, "Number of ranks in the job.", -1, 1 << 24};
const config::StringParam root{"ZCX_ROOT", "",
    "host:port of the bootstrap root (rank 0 listens there)."};
const config::StringParam secret{"ZCX_SECRET", "",
    "Job secret (16 hex digits) that authenticates bootstrap and connection handshakes. "
    "zcx-run sets a random one; under other launchers it is derived from the job id."};
const config::IntParam local_rank{"ZCX_LOCAL_RANK", -1, "Rank among the processes of this host.",
    -1, 1 << 24};
const config::StringParam run_job_id{"ZCX_RUN_JOB", "",
    "Job id set by zcx-run (informational; used in names of host resources)."};

const config::StringParam net_provider{"ZCX_NET_PROVIDER", "auto",
    "Provider the NCCL plugin uses: auto (ib when it finds an active device, else tcp), or a "
    "provider name such as ib or tcp. A named provider without devices makes the plugin "
    "fail its init, so NCCL falls back to its internal nets (or fails when NCCL_NET=zcx)."};

int64_t timeout_ms() {
  double s = timeout.get();
  if (!(s > 0)) return 1;
  double ms = std::ceil(s * 1000.0);
  return ms > 1e12 ? static_cast<int64_t>(1e12) : static_cast<int64_t>(ms);
}

int64_t duplex_wait_ns() {
  double s = duplex_wait.get();
  if (!(s > 0)) return 0;
  return static_cast<int64_t>(std::min(s * 1e3, static_cast<double>(timeout_ms())) * 1e6);
}

}  // namespace zcx::params
