// Bootstrap: how N processes find each other and exchange small blobs (provider handles,
// host names) before any provider connection exists. Rank 0 serves as root at the address in
// the unique id; every connection starts with an authenticated handshake (magic, wire
// version, library version, job secret, rank, nranks) and every wait is bounded by
// ZCX_TIMEOUT. Wire formats are in docs/WIRE.md.
#pragma once

#include "common/socket.h"
#include "common/status.h"

#include <zcx/zcx.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zcx {

struct UniqueId {
  SockAddr root;       // where rank 0 listens
  uint64_t secret = 0; // random 64-bit job secret
};

// Encodes/decodes the 128-byte public zcx_unique_id_t (magic + version + address + secret).
Status unique_id_encode(const UniqueId& id, zcx_unique_id_t* out);
Status unique_id_decode(const zcx_unique_id_t& in, UniqueId* out);
// Picks the root address (ZCX_SOCKET_IFNAME) and a fresh secret, and reserves the listening
// socket so that rank 0 of this process can take it over in Bootstrap::init.
Status unique_id_create(UniqueId* out);

// Where the ranks of a job come from (ZCX_*, Open MPI, Slurm or torchrun variables).
struct LaunchInfo {
  int rank = -1;
  int nranks = -1;
  int local_rank = -1;
  UniqueId id;
  std::string source;  // "zcx-run", "mpirun", "srun", "torchrun", "ZCX_*"
};
Status launch_info_from_env(LaunchInfo* out);
// The rank text of the launcher launch_info_from_env would take, unchecked, or nullopt:
// for the logger before the bootstrap (it neither logs nor sets an error).
std::optional<std::string> launcher_rank_text();
// Parses a job secret as written in ZCX_SECRET: 1 to 16 hex digits, not all zero.
Status parse_secret(const std::string& text, uint64_t* out);

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  static Status init(const UniqueId& id, int rank, int nranks, std::unique_ptr<Bootstrap>* out);
  static Status init_from_env(std::unique_ptr<Bootstrap>* out);

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual uint64_t secret() const = 0;
  // Host name of every rank (known after init) — used to name peers in errors and to
  // decide which peers share a host.
  virtual const std::string& host(int rank) const = 0;
  virtual int pid(int rank) const = 0;

  // data holds nranks slots of `bytes` each; this rank's slot is filled on entry, all
  // slots on return.
  virtual Status allgather(void* data, size_t bytes) = 0;
  virtual Status barrier() = 0;
  // Small point-to-point messages between ranks over the bootstrap network; matched by
  // (peer, tag) in order.
  virtual Status send(int peer, int tag, const void* data, size_t bytes) = 0;
  virtual Status recv(int peer, int tag, void* data, size_t bytes) = 0;
  // Bounded and idempotent: later calls fail with kAborted.
  virtual void abort() = 0;
};

// "rank 3 (hostB)" — how every error names a peer.
std::string describe_peer(const Bootstrap& bs, int rank);

}  // namespace zcx
