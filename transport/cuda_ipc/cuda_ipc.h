// cuda_ipc provider: GPU memory between processes of one host. The receiver exports each
// receive buffer (a legacy CUDA IPC handle for cudaMalloc memory, made once per allocation,
// or a cuMem POSIX fd for VMM memory) in a POST message; the sender imports it (cached per
// peer process, see cuda_ipc_cache.cc), copies into it with cudaMemcpyAsync on its own
// stream (the copy engines; NVLink where present), records an event, and when the event
// completes sends DONE. The receiver never touches the sender's memory. Where the sender
// cannot map the buffer while a stream-ordered call holds a stream (a reused range,
// cuda_ipc_cache.cc), the bytes go through host memory instead: the sender copies them into
// a memfd and passes it in a DATA packet; the receiver copies them in on its own stream. So
// do receives into a buffer that no one handle exports (one over several cuMem allocations
// mapped back to back, as PyTorch's expandable segments, or in a cuMem allocation made
// without the POSIX-fd handle type): the receiver POSTs kind "host".
//
// Control channel: one SOCK_SEQPACKET abstract Unix socket per one-directional connection
// (one packet per message, SCM_RIGHTS for VMM fds); SO_PEERCRED checks both ends, the
// connector's hello carries the job secret. Messages (docs/WIRE.md "cuda_ipc"):
//   HELLO  connector -> acceptor: magic, version, secret, listen nonce, rank, pid, device, host
//   ACK    acceptor -> connector: magic, code
//   POST   receiver -> sender: magic, seq, capacity, export (kind, base, size, offset,
//          buffer id, 64-byte legacy handle) [+ fd]
//   DONE   sender -> receiver: magic, seq, size
//   DATA   sender -> receiver: magic, seq, size + a memfd holding the bytes (instead of DONE)
// Sends and receives match in posting order (seq); one buffer per receive (max_recvs 1).
#pragma once

#include "base/provider.h"
#include "common/dl/cuda_shim.h"
#include "common/fd.h"
#include "common/memfd.h"
#include "common/status.h"
#include "common/wire.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace zcx::cuda_ipc {

inline constexpr uint32_t kWireVersion = 3;  // 3: export kinds kHost and kPieces
inline constexpr int kMaxRequests = 256;
inline constexpr size_t kMaxMessage = size_t(1) << 40;
inline constexpr size_t kMaxPieces = 64;  // allocations one POST lists (one fd each)
inline constexpr size_t kMaxPacket = 256 + kMaxPieces * 32;

inline constexpr uint32_t kAckMagic = 0x41504943;   // "CIPA"
inline constexpr uint32_t kPostMagic = 0x50504943;  // "CIPP"
inline constexpr uint32_t kDoneMagic = 0x44504943;  // "CIPD"
inline constexpr uint32_t kDataMagic = 0x46504943;  // "CIPF"
enum AckCode : uint32_t { kAckOk = 0, kAckSecret = 1, kAckVersion = 2 };

// kNone: a zero-byte receive (nothing to export). kHost: nothing the sender can map; the
// bytes come in DATA. kPieces (on the wire only): the POST lists several kVmm exports, one per
// cuMem allocation of a buffer over allocations mapped back to back.
enum class ExportKind : uint32_t { kNone = 0, kLegacy = 1, kVmm = 2, kHost = 3, kPieces = 4 };

// What a receiver tells the sender about one allocation of a receive buffer.
struct Export {
  ExportKind kind = ExportKind::kLegacy;
  uint64_t base = 0;        // allocation base in the exporter's address space
  uint64_t size = 0;        // allocation size
  uint64_t offset = 0;      // buffer - base
  uint64_t buffer_id = 0;   // CU_POINTER_ATTRIBUTE_BUFFER_ID: changes when base is reused
  uint8_t legacy[64] = {};  // cudaIpcMemHandle_t (kLegacy)
};

// One receive buffer as POSTed: its capacity, and where its bytes go: one export (of any
// kind) or, for a buffer over cuMem allocations mapped back to back, one kVmm export per
// allocation in address order (the first from the buffer's offset, the others from their
// base); the fds of its kVmm exports, in order.
struct PostedBuffer {
  uint64_t cap = 0;
  std::vector<Export> pieces;
  std::vector<UniqueFd> fds;
};

// Export of a local device buffer of `bytes` (> 0) bytes (cuda_ipc_md.cc): out's pieces and
// fds (the caller sends and closes them).
Status export_buffer(const void* data, size_t bytes, PostedBuffer* out);

// The POST message (cuda_ipc_wire.cc): its bytes (at most kMaxPacket), and reading one with
// its descriptors already in p->fds: false unless every field is in bounds, the pieces hold
// the capacity and each kVmm piece has its descriptor.
size_t post_write(uint64_t seq, const PostedBuffer& p, uint8_t* buf);
bool post_read(wire::Reader& r, uint64_t* seq, PostedBuffer* p);

// Process-wide cache of imported peer allocations (cuda_ipc_cache.cc), keyed by exporter pid,
// base and buffer id. acquire maps on a miss (fd: kVmm only) and returns the local address
// of the allocation base; every acquire that set *base is paired with a release. *base stays
// null when the driver will not map a reused range until the old mapping closes, which must
// wait while a stream-ordered call holds a stream: the caller then goes through host memory.
Status cache_acquire(int pid, int device, const Export& e, int fd, uint8_t** base);
void cache_release(int pid, const Export& e);
// Unmaps every entry of `pid` no longer referenced (the peer closed).
void cache_forget(int pid);

struct Context {
  int rank = -1;
  int nranks = 0;
  uint64_t secret = 0;
  std::string host;
  const CudaApi* api = nullptr;  // nullptr: no driver, 0 devices
  int ndev = 0;
  std::string why_none;
};

struct Comm;

struct Request {
  Comm* comm = nullptr;
  bool is_send = false;
  bool done = false;
  uint64_t seq = 0;
  // send
  const void* src = nullptr;
  size_t size = 0;
  bool copying = false;
  std::vector<Export> dst;       // the matching POST's pieces this send reaches, mapped at
  std::vector<uint8_t*> mapped;  // these imported bases (released when done)
  cudaEvent_t event = nullptr;  // the copy out (send) or in (DATA receive)
  UniqueFd bounce_fd;         // send through host memory: the memfd passed in DATA
  // recv
  void* buf = nullptr;
  size_t cap = 0;
  size_t got = 0;
  bool filling = false;       // DATA arrived, its copy in is running
  Mapping bounce;             // both sides of a DATA transfer: the memfd's mapping
};

struct Comm {
  bool is_send = false;
  Context* ctx = nullptr;
  int device = 0;
  UniqueFd sock;
  zcx_peer_info_t peer{};
  bool acked = false;           // sender: ACK received
  cudaStream_t stream = nullptr;  // copies out (sender) and of DATA in (receiver)
  std::vector<cudaEvent_t> spare_events;  // of completed requests, for the next copies
  std::deque<Request*> queue;   // posting order
  std::deque<PostedBuffer> posts;  // sender: POSTs not yet matched
  uint64_t next_seq = 0;        // sends/receives posted
  uint64_t next_post = 0;       // sender: POSTs received
  int64_t last_progress_ns = 0;
  int64_t timeout_ms = 0;  // ZCX_TIMEOUT, read once per comm (not per progress call)
  // The peer closed its end after the packets read so far: an error only for requests that
  // still wait (what it sent before closing, a last DONE included, was delivered).
  std::string closed;
  StickyError error;
  ~Comm();
};

struct ListenComm {
  Context* ctx = nullptr;
  int device = 0;
  UniqueFd sock;
  uint64_t nonce = 0;
  std::vector<UniqueFd> pending;
};

// Parameters (cuda_ipc_config.cc).
bool cfg_cache_enabled();

// Devices (cuda_ipc_device.cc).
Status context_open(Context* ctx);
Status fill_props(Context* ctx, int dev, zcx_device_props_t* p);

// Connection set-up (cuda_ipc_ep.cc).
Status listen(Context* ctx, int dev, void* handle, ListenComm** out);
Status connect(Context* ctx, int dev, const void* handle, Comm** out);
Status accept(ListenComm* lc, Comm** out);
std::string peer_name(const Comm* c);
// Packets on a control socket: kInProgress when the socket is full / nothing arrived;
// kRemote (quiet: the caller names the peer) when the peer closed. fd -1: none attached.
// The _fds forms carry up to kMaxPieces descriptors.
Status packet_send(int sock, const void* buf, size_t len, int fd);
Status packet_send_fds(int sock, const void* buf, size_t len, const int* fds, size_t nfds);
Status packet_recv(int sock, void* buf, size_t cap, size_t* len, UniqueFd* fd);
Status packet_recv_fds(int sock, void* buf, size_t cap, size_t* len, std::vector<UniqueFd>* fds);

// Data path (cuda_ipc_progress.cc).
Status isend(Comm* c, const void* data, size_t size, Request** out);
Status irecv(Comm* c, void* data, size_t cap, Request** out);
Status test(Request* r, int* done, size_t* sizes);
void comm_drop_requests(Comm* c);

}  // namespace zcx::cuda_ipc
