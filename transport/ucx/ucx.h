// The ucx provider: the provider contract (base/provider.h) on UCP, loaded through the UCX
// shim (common/dl/ucx_shim.h). One UCP context and one worker per zcx ctx; one endpoint per
// connection.
//
// Connection set-up. A UCP worker address is hundreds of bytes and does not fit the 128-byte
// handle, so the handle carries the address of a small zcx TCP listener (the side channel).
// Connector and acceptor exchange their zcx handshake (magic, version, job secret, rank, pid,
// host) and their worker addresses over it. Then the connector makes its UCP endpoint (error
// mode PEER): where UCX uses tcp on both sides, through the acceptor's ucp_listener (UCX's
// sockaddr connection manager; its port comes in the ack), plus a second, worker-address
// endpoint for messages below ZCX_UCX_SOCKADDR_MIN; elsewhere from the acceptor's worker
// address alone. Why: ucx_sockaddr.cc. Matching is by exact sequence tags, so which endpoint
// carries a message does not matter. The socket stays open for the life of the
// connection: a peer that dies closes it at once (the kernel does), which gives a prompt
// "peer died" on any transport, and a peer that closes its comm first sends a close record
// with its message count.
// docs/WIRE.md, "ucx provider", has the formats.
//
// Matching. UCP tag matching is per worker, so every tag carries the connection id that the
// acceptor assigned plus a per-connection sequence number:
//   bits 63..60 kind | 59..40 connection id | 39..24 low 16 bits of the zcx tag | 23..0 seq
// A plain receive posts the exact (connection, seq) tag, so sends and receives pair up in
// posting order regardless of the zcx tag. A grouped receive of n buffers takes the next n
// sequence numbers; it probes for each and lands the message in the buffer whose tag matches
// the 16 tag bits the sender put in the UCP tag. Tag matching (rather than the stream or AM
// API) keeps the data path zero-copy: a pre-posted receive lets UCX's rendezvous write straight
// into the user buffer, as ucx_perftest's tag_bw does.
#pragma once

#include "base/provider.h"
#include "common/dl/ucx_shim.h"
#include "common/fd.h"
#include "common/socket.h"
#include "common/status.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace zcx::ucx {

inline constexpr uint32_t kLog = kLogUcx;

// Tag layout (see above).
enum class TagKind : uint64_t { kData = 3 };
inline constexpr int kKindShift = 60;
inline constexpr int kConnShift = 40;
inline constexpr int kUserTagShift = 24;
inline constexpr uint64_t kConnMask = (1ull << 20) - 1;
inline constexpr uint64_t kUserTagMask = 0xffff;
inline constexpr uint64_t kSeqMask = (1ull << 24) - 1;
inline constexpr uint64_t kAnyUserTagMask = ~(kUserTagMask << kUserTagShift);

inline uint64_t make_tag(TagKind kind, uint64_t low60) {
  return (static_cast<uint64_t>(kind) << kKindShift) | (low60 & ((1ull << kKindShift) - 1));
}
inline uint64_t data_tag(uint32_t conn, int user_tag, uint32_t seq) {
  return make_tag(TagKind::kData, ((conn & kConnMask) << kConnShift) |
                                      ((static_cast<uint64_t>(user_tag) & kUserTagMask)
                                       << kUserTagShift) |
                                      (seq & kSeqMask));
}
inline int tag_user_bits(uint64_t tag) { return static_cast<int>((tag >> kUserTagShift) & kUserTagMask); }

inline constexpr int kMaxRecvs = 8;
// Largest single message (1 TiB, NCCL_MAX_NET_SIZE_BYTES): anything above is a caller bug.
inline constexpr size_t kMaxMessageBytes = size_t{1} << 40;

// The identity and job of this process, from init.
struct Self {
  int rank = -1;
  int nranks = 0;
  uint64_t secret = 0;
  std::string host;
};

// Error state an endpoint's error callback writes; owned by the comm, outlives the ep.
struct EpError {
  ucs_status_t status = UCS_OK;
  bool* any_failed = nullptr;       // also raised when set (the ctx's server endpoints)
};

// An endpoint UCX made from a connection request on the ctx's ucp_listener: the acceptor's
// half of a sockaddr connection. Nothing sends on it; it lives until the connector's side
// goes away (its error callback fires) or the ctx ends (ucx_sockaddr.cc).
struct ServerEp {
  ucp_ep_h ep = nullptr;
  std::unique_ptr<EpError> box;
};

struct Ctx {
  const UcxApi* api = nullptr;
  Self self;
  std::string unavailable;          // why there are no devices ("" when usable)
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  uint32_t next_conn_id = 1;        // acceptor-side connection ids (tags carry 20 bits)
  std::string worker_address;       // this worker's UCP address, sent in handshakes
  uint64_t mem_types = 0;           // UCS_MEMORY_TYPE bits UCP supports here
  std::recursive_mutex mu;          // serializes every UCP call on this ctx (worker: SINGLE)
  std::map<std::string, struct PendingConnect*> connects;  // by handle bytes
  int spin = 1;                     // worker progress calls per test()
  bool worker_unsafe = false;       // UCX still holds requests: never destroy the worker
  bool peer_mode_unreachable = false;  // UCX_TLS lacks peer-failure support (ucx_handshake_ep.cc)
  std::vector<struct Request*> groups;  // grouped receives with messages still unclaimed
  std::set<struct Mr*> mrs;         // live registrations, unmapped at finalize if left
  // The sockaddr connection manager (ucx_sockaddr.cc).
  ucp_listener_h ucp_listener = nullptr;
  uint16_t ucp_listener_port = 0;   // sent in the ack; 0: connect by worker address
  bool ucp_listener_tried = false;
  int sockaddr_usable = -1;         // sockaddr_usable(): -1 until asked
  std::vector<ucp_conn_request_h> conn_requests;  // from the listener callback, not yet taken
  std::vector<ServerEp> server_eps;
  // Connection requests the listener takes, by client IP: one per accepting ack sent to a
  // connector from that IP (the job secret was checked on the side channel; UCX's
  // connection manager has no authentication of its own).
  std::map<std::string, int> sockaddr_expected;
  bool server_ep_failed = false;    // some server endpoint's error callback fired
};

struct PeerName {
  zcx_peer_info_t info{};
  std::string text() const;         // "rank R (host H, pid P)"
};

struct Request;

// Fields shared by send and receive comms.
struct CommBase {
  Ctx* ctx = nullptr;
  ucp_ep_h ep = nullptr;
  std::unique_ptr<EpError> ep_error;  // heap: the callback holds its address
  // With a sockaddr endpoint (ucx_sockaddr.cc), messages below sockaddr_min go on a second,
  // worker-address endpoint: its one active-message lane beats the rendezvous lanes there.
  ucp_ep_h small_ep = nullptr;
  std::unique_ptr<EpError> small_ep_error;
  size_t sockaddr_min = 0;
  PeerName peer;
  uint32_t conn_id = 0;
  uint32_t seq = 0;                    // next sequence number
  int64_t last_activity_ns = 0;
  int64_t timeout_ms = 0;              // ZCX_TIMEOUT, read once per comm (not per test)
  bool use_memh = false;               // ZCX_UCX_USE_MEMH, read once per comm
  Request* live = nullptr;             // intrusive list of requests not yet done
  std::vector<Request*> spare;         // finished requests kept for reuse
  StickyError failure;                 // the first failure, reported by every later call
  bool is_send = false;
  struct PendingConnect* handshake = nullptr;  // send comm waiting for the ack (half-open)
  UniqueFd sock;                       // the side channel: liveness and the close record
  int64_t next_sock_check_ns = 0;
  bool peer_closed = false;            // the peer sent its close record ...
  uint64_t peer_count = 0;             // ... after posting this many messages
  int64_t peer_closed_ns = 0;          // when we read that record
  std::string close_rx;                // close record bytes read so far
};

// One struct for both directions (is_send tells them apart), so close needs no virtual.
using SendComm = CommBase;
using RecvComm = CommBase;

struct Request {
  CommBase* comm = nullptr;
  Request* prev = nullptr;
  Request* next = nullptr;
  int n = 1;                           // buffers (1 for a send)
  bool grouped = false;
  uint32_t first_seq = 0;
  int64_t posted_ns = 0;
  void* ucp[kMaxRecvs] = {};           // UCP requests still pending (nullptr: done)
  bool matched[kMaxRecvs] = {};        // grouped: buffer i has its message
  bool seq_taken[kMaxRecvs] = {};      // grouped: sequence first_seq+i was probed
  void* data[kMaxRecvs] = {};
  size_t sizes[kMaxRecvs] = {};        // posted sizes, then received sizes
  int tags[kMaxRecvs] = {};
  Status error = Status::kSuccess;
};

struct Mr {
  Ctx* ctx = nullptr;
  ucp_mem_h memh = nullptr;
};

// Memory registration.
Status reg_mr(Ctx* ctx, void* data, size_t size, int kind, Mr** out);
Status dereg_mr(Mr* mr);

// Connection handshake payload (docs/WIRE.md).
struct Hello {
  uint16_t kind = 0;                   // 1 hello, 2 ack
  uint16_t result = 0;                 // ack: 0 accepted, else a zcx_status_t
  uint64_t secret = 0;
  uint64_t nonce = 0;                  // connector's random nonce, echoed in the ack
  uint32_t conn_id = 0;                // hello: the listener id; ack: the id data tags carry
  zcx_peer_info_t who{};
  uint16_t ucp_port = 0;               // ack: the acceptor's ucp_listener port (0: none);
                                       // hello: 1 when the connector would connect to it
};
inline constexpr size_t kHelloBytes =
    4 + 2 + 2 + 2 + 8 + 8 + 4 + 4 + 4 + 2 + ZCX_HOST_NAME_BYTES + 2;
inline constexpr size_t kMaxWorkerAddress = 8192;  // bound on a peer's worker address
inline constexpr size_t kCloseRecordBytes = 16;
std::string hello_encode(const Hello& h);
Status hello_decode(const void* buf, size_t len, Hello* out);

// Status text for a UCX status (never null).
const char* ucs_text(const Ctx* ctx, ucs_status_t s);
void ep_error_callback(void* arg, ucp_ep_h ep, ucs_status_t status);
ucp_err_handler_t error_handler(EpError* box);  // ep_error_callback writing into box
// Closes an endpoint, waiting at most ZCX_TIMEOUT; the error box is leaked if it did not close.
void ep_close(Ctx* ctx, ucp_ep_h ep, std::unique_ptr<EpError> box);
Status fill_self(const zcx_provider_init_t* init, Self* self);

// Connections (ucx_ep.cc).
Status listen(Ctx* ctx, void* handle, struct ListenComm** out);
Status connect(Ctx* ctx, const void* handle, SendComm** out);
Status accept(ListenComm* lc, RecvComm** out);
Status close_listen(ListenComm* lc);
void drop_pending_connects(Ctx* ctx);
// Half-open send comm: kInProgress until the ack arrived and the endpoint exists.
Status handshake_progress(CommBase* comm);
void connect_destroy(struct PendingConnect* pc);
void close_comm(CommBase* comm);

// The sockaddr connection manager (ucx_sockaddr.cc). Listener: once per ctx, best effort.
void ucp_listener_start(Ctx* ctx, const SockAddr& local);
void take_conn_requests(Ctx* ctx);     // from progress(): server endpoints for new requests
void sockaddr_expect(Ctx* ctx, const SockAddr& connector);  // an accepting ack went there
// At ctx end: waits for the requests still expected, closes every server endpoint, then
// destroys the listener.
void sockaddr_shutdown(Ctx* ctx);
// Whether this ctx makes endpoints through the manager (ZCX_UCX_SOCKADDR and UCX uses tcp).
bool sockaddr_usable(Ctx* ctx);
// Connector: the endpoint to the acceptor's ucp_listener at `addr`.
Status sockaddr_ep_create(CommBase* c, const SockAddr& addr);

// Data path (ucx_progress.cc).
Status isend(SendComm* c, void* data, size_t size, int tag, Mr* mr, Request** out);
Status irecv(RecvComm* c, int n, void** data, size_t* sizes, int* tags, Mr** mrs,
             Request** out);
Status test(Request* r, int* done, size_t* sizes);
void drop_requests(CommBase* comm);
void progress(Ctx* ctx);
// Side channel after the handshake (ucx_handshake.cc).
std::string close_record(uint64_t count);
// Reads what the peer wrote since: kRemote when it died (EOF without a close record).
Status poll_side_channel(CommBase* comm);

// Devices and contexts (ucx_device.cc).
Status ctx_create(const zcx_provider_init_t* init, Ctx** out);
void ctx_destroy(Ctx* ctx);
Status get_properties(Ctx* ctx, int dev, zcx_device_props_t* props);

}  // namespace zcx::ucx
