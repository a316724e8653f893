// The ib provider: libibverbs RC queue pairs with the NCCL-style receiver-driven rendezvous
// (docs/WIRE.md "ib"): the receiver RDMA-writes clear-to-send (CTS) entries into the
// sender's FIFO; the sender RDMA-writes the payload straight into the posted buffer and
// marks completion with RDMA WRITE WITH IMMEDIATE. Connection set-up exchanges QP numbers
// over a TCP side channel that stays open to notice a dead peer quickly.
#pragma once

#include "base/provider.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/dl/ibv_shim.h"
#include "common/fd.h"
#include "common/socket.h"
#include "common/status.h"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// Return a failed Status as zcx_status_t from a C entry point.
#define ZCX_IB_TRY_C(expr)                                                 \
  do {                                                                     \
    ::zcx::Status zcx_ib_s_ = (expr);                                      \
    if (zcx_ib_s_ != ::zcx::Status::kSuccess) return ::zcx::to_c(zcx_ib_s_); \
  } while (0)

namespace zcx::ib {

inline constexpr uint32_t kLog = kLogIb;
inline constexpr int kSlots = 256;          // receives in flight per comm (FIFO depth)
inline constexpr int kMaxRecvs = 8;         // buffers in one grouped receive
inline constexpr int kMaxQps = 8;           // ZCX_IB_QPS upper bound
inline constexpr int kSendReqs = kSlots * kMaxRecvs;
inline constexpr size_t kSplitAlign = 128;  // multi-QP chunks never split a 128-byte line
inline constexpr uint64_t kMaxMessage = 1ull << 40;

// ---- configuration (ib_config.cc) ----
namespace params {
extern const config::StringParam library;     // ZCX_IB_LIBRARY
extern const config::StringParam hca;         // ZCX_IB_HCA
extern const config::IntParam gid_index;      // ZCX_IB_GID_INDEX
extern const config::IntParam qps;            // ZCX_IB_QPS
extern const config::BoolParam split;         // ZCX_IB_SPLIT_DATA_ON_QPS
extern const config::IntParam timeout;        // ZCX_IB_TIMEOUT
extern const config::IntParam retry_cnt;      // ZCX_IB_RETRY_CNT
extern const config::SizeParam inline_bytes;  // ZCX_IB_INLINE
extern const config::BoolParam poll_yield;    // ZCX_IB_POLL_YIELD
extern const config::StringParam test_corrupt_cts;  // ZCX_IB_TEST_CORRUPT_CTS
}  // namespace params

// ---- devices (ib_device.cc): process-wide, refcounted ----
struct MrEntry;  // ib_md.cc

struct Device {
  std::string name;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  int port = 1;
  ibv_port_attr port_attr{};
  int gid_index = 0;
  ibv_gid gid{};
  uint64_t guid = 0;
  int speed_mbps = 0;
  int max_qp = 0;
  int max_qp_wr = 0;
  int max_cqe = 0;
  std::string pci_path;
  uint32_t mem_kinds = ZCX_MEM_HOST;
  std::mutex mr_mu;                 // guards mrs (regMr may race with the data path)
  std::vector<MrEntry*> mrs;        // sorted by start address
  ~Device();
};

// Opens the library and devices on the first call; later calls only count.
Status devices_acquire(std::vector<Device*>* out);
void devices_release();
std::string gid_string(const ibv_gid& gid);

// ---- memory (ib_md.cc) ----
struct MrEntry {
  Device* dev;
  uintptr_t start;
  size_t len;
  int refs;
  ibv_mr* mr;
  int kind;
};
Status mr_register(Device* dev, void* data, size_t size, int kind, MrEntry** out);
Status mr_register_dmabuf(Device* dev, void* data, size_t size, int kind, uint64_t offset,
                          int fd, MrEntry** out);
void mr_release(MrEntry* e);
// The MR covering [data, data+size) or an InvalidArg error.
Status mr_check(const void* mhandle, const void* data, size_t size, const char* what);

// ---- on-wire structures (docs/WIRE.md) ----
// One clear-to-send entry, written by the receiver into the sender's FIFO. seq is
// repeated first and last so a torn entry (read while the write lands) is never accepted.
struct CtsEntry {
  uint64_t seq;
  uint64_t addr;
  uint64_t size;
  uint32_t rkey;
  int32_t tag;
  uint32_t nreqs;
  uint32_t index;
  uint64_t pad[2];
  uint64_t seq_end;
};
static_assert(sizeof(CtsEntry) == 64);
using CtsSlot = std::array<CtsEntry, kMaxRecvs>;

// Immediate data of a payload write: slot (8 bits) | buffer index (3) | parts (4).
inline uint32_t imm_encode(int slot, int index, int parts) {
  return static_cast<uint32_t>(slot) | static_cast<uint32_t>(index) << 8 |
         static_cast<uint32_t>(parts) << 11;
}

// The handshake both sides send once over TCP (fixed size, bounds-checked on receipt).
struct Hello {
  uint64_t secret = 0;
  uint64_t nonce = 0;
  int32_t rank = -1;
  int32_t pid = 0;
  std::string host;
  uint8_t nqps = 1;
  uint8_t mtu = 0;
  uint8_t link_layer = 0;
  uint16_t lid = 0;
  ibv_gid gid{};
  uint32_t psn = 0;
  uint32_t qpn[kMaxQps] = {};
  uint64_t buf_addr = 0;  // connector: its CTS FIFO; acceptor: its sizes array
  uint32_t buf_rkey = 0;
};
inline constexpr size_t kHelloBytes = 256;
void hello_encode(const Hello& h, uint16_t kind, uint8_t* out);
Status hello_decode(const uint8_t* in, uint16_t kind, Hello* h, const std::string& from);

// ---- connections (ib_ep.cc) ----
struct Ctx {
  zcx_provider_init_t self{};
  std::vector<Device*> devs;
  std::mutex mu;
  std::vector<struct PendingConnect*> pending;  // connects in progress, keyed by handle
};

// Byte-at-a-time non-blocking transfer of one fixed-size message.
struct NbIo {
  uint8_t buf[kHelloBytes] = {};
  size_t len = 0;
  size_t done = 0;
  Status send(int fd, const char* peer);
  Status recv(int fd, const char* peer);
};

struct Request;

// State shared by both directions of a connected QP set.
struct Comm {
  Ctx* ctx = nullptr;
  Device* dev = nullptr;
  bool is_send = false;
  UniqueFd sock;
  zcx_peer_info_t peer{};
  std::string peer_desc;            // "rank R (host, pid P)" for messages
  ibv_cq* cq = nullptr;
  std::vector<ibv_qp*> qps;
  int nqps = 1;
  int max_inline = 0;
  Hello local, remote;
  StickyError error;
  int64_t next_sock_check_ns = 0;
  int64_t last_progress_ns = 0;
  bool poll_yield = false;          // ZCX_IB_POLL_YIELD, read once per comm
  bool split = false;               // ZCX_IB_SPLIT, read once per comm (not per message)
  size_t inline_bytes = 0;          // ZCX_IB_INLINE, read once per comm
  int64_t timeout_ms = 0;           // ZCX_TIMEOUT, read once per comm
  std::mutex mu;                    // one thread at a time in the data path
  ~Comm();
};

struct SendComm : Comm {
  std::unique_ptr<CtsSlot[]> fifo;  // written by the peer
  MrEntry* fifo_mr = nullptr;
  std::unique_ptr<uint64_t[]> size_src;  // sizes we RDMA-write to the peer
  MrEntry* size_src_mr = nullptr;
  uint64_t seq = 0;                 // CTS slots fully consumed
  uint8_t matched[kSlots] = {};     // per slot: bitmask of entries already sent to
  uint64_t msg_count = 0;           // round-robin QP choice
  std::unique_ptr<Request[]> reqs;  // kSendReqs, index slot * kMaxRecvs + entry
  ~SendComm();
};

struct RecvComm : Comm {
  std::unique_ptr<CtsSlot[]> cts_src;  // local copies we RDMA-write to the peer's FIFO
  MrEntry* cts_src_mr = nullptr;
  std::unique_ptr<uint64_t[]> sizes;   // [kSlots][kMaxRecvs], written by the peer
  MrEntry* sizes_mr = nullptr;
  uint64_t seq = 0;                    // receives posted
  uint64_t completed = 0;              // oldest receive not yet completed
  std::unique_ptr<Request[]> reqs;     // kSlots
  std::string test_corrupt;            // ZCX_IB_TEST_CORRUPT_CTS, read once per comm
  // iflush (made at the first one): a QP connected to itself, the host word its RDMA reads
  // land in, and the flush requests (kSlots, used round robin).
  ibv_qp* flush_qp = nullptr;
  std::unique_ptr<uint64_t> flush_sink;
  MrEntry* flush_sink_mr = nullptr;
  std::unique_ptr<Request[]> flush_reqs;
  uint64_t flush_seq = 0;
  ~RecvComm();
};

struct ListenComm {
  Ctx* ctx = nullptr;
  Device* dev = nullptr;
  UniqueFd fd;
  SockAddr addr;
  uint64_t nonce = 0;
  struct PendingAccept* pending = nullptr;
  ~ListenComm();
};

enum class ReqKind : uint8_t { kFree, kSend, kRecv, kFlush };

struct Request {
  ReqKind kind = ReqKind::kFree;
  Comm* comm = nullptr;
  int index = 0;
  int n = 1;                         // buffers (recv)
  int pending = 0;                   // completions still expected (send)
  size_t sizes[kMaxRecvs] = {};      // posted sizes (recv) / message size (send)
  int parts_seen[kMaxRecvs] = {};
  int parts_total[kMaxRecvs] = {};
  int64_t start_ns = 0;
};

// wr_id layout: kind in the top byte, request index below.
enum : uint64_t {
  kWrSend = 1ull << 56,
  kWrRecv = 2ull << 56,
  kWrCts = 3ull << 56,
  kWrFlush = 4ull << 56,
};

Status qp_create(Comm* c, int nqps);
Status qp_connect(Comm* c);  // INIT -> RTR -> RTS against c->remote
Status flush_qp_create(RecvComm* c);
Status post_recv_wrs(Comm* c, int qp, int count);
Status comm_fail(Comm* c, Status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// The side channel (checked at most every 10 ms): true when the peer closed it or died.
bool peer_gone(Comm* c, std::string* why);

zcx_status_t listen(void* ctx, int dev, void* handle, void** listen_comm);
zcx_status_t connect(void* ctx, int dev, const void* handle, void** send_comm);
zcx_status_t accept(void* listen_comm, void** recv_comm);
void pending_connects_clear(Ctx* ctx);

// ---- data path (ib_progress.cc) ----
zcx_status_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void** request);
zcx_status_t irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                   void** mhandles, void** request);
zcx_status_t test(void* request, int* done, size_t* sizes);
zcx_status_t iflush(void* recv_comm, int n, void** data, size_t* sizes, void** mhandles,
                    void** request);
Status wc_error(Comm* c, const ibv_wc& wc);

// ---- CUDA (ib_cuda.cc, ZCX_HAVE_CUDA only; compiled, not tested on this VM) ----
uint32_t cuda_mem_kinds(Device* dev);
Status cuda_dmabuf_fd(void* data, size_t size, int* fd, uint64_t* offset);

}  // namespace zcx::ib
