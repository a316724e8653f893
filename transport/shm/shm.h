// Shared-memory provider (same host): one memfd segment per one-directional connection.
//
// Segment layout (docs/WIRE.md, "shm segment"), created and sized by the connector (sender):
//   SegHeader      one line, written once before the fd is passed, validated by the acceptor
//   SenderLine     written only by the sender (chunk stream head, CMA half done, closed)
//   ReceiverLine   written only by the receiver (slot tail, chunk tail, CMA acks, closed)
//   slots[nslots]  single-producer/single-consumer ring of messages; each slot is a
//                  SlotHeader followed by inline payload. A slot is published by storing
//                  its seq last (release); the receiver spins on that word, so an 8-byte
//                  message costs one cache-line transfer.
//   chunks[nchunks] byte stream for large messages (pipelined copy-in/copy-out). Pipelined
//                  messages in flight together form an interleave group: the stream
//                  carries their chunks round-robin (shm_interleave.cc). A group is cut
//                  either in the ring's own chunks (coarse) or in 16 KiB chunks over a
//                  quarter of the ring (fine; Layout::fine_*), as its slots say; the
//                  sender changes the cut only when the ring is empty.
// Each line group is 128-byte aligned so the adjacent-line prefetcher cannot couple the
// sender's and the receiver's lines. Every index and size read from the segment is treated
// as untrusted and bounds-checked before use.
#pragma once

#include "base/provider.h"
#include "common/fd.h"
#include "common/memfd.h"
#include "common/proc_watch.h"
#include "common/status.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zcx::shm {

inline constexpr uint32_t kSegMagic = 0x5353435a;  // "ZCSS"
inline constexpr uint32_t kWireVersion = 3;
inline constexpr size_t kLineGroup = 128;
inline constexpr int kMaxRecvs = 8;
inline constexpr int kMaxRequests = 512;  // in flight per comm
inline constexpr size_t kMaxMessage = size_t(1) << 40;
inline constexpr int kMaxGroup = 64;  // pipelined messages in one interleave group

// kSlotPipe / kSlotPipeFine: a pipelined message whose group streams in the coarse / fine cut.
enum SlotType : uint32_t { kSlotInline = 1, kSlotPipe = 2, kSlotCma = 3, kSlotPipeFine = 4 };
enum SendPhase { kSendNew = 0, kSendGroup, kSendCmaRdv, kSendCmaDone };
enum RecvPhase { kRecvMatch = 0, kRecvCmaRead, kRecvCmaWait };
enum class LargeMode { kPipeline, kCma, kAuto };
enum class StreamCut { kAuto, kFine, kCoarse };  // ZCX_SHM_STREAM
inline constexpr uint32_t kFineChunkBytes = 16 * 1024;

struct SlotHeader {
  std::atomic<uint64_t> seq;  // message number + 1; stored last
  uint64_t size;
  int32_t tag;
  uint32_t type;              // SlotType
  uint64_t aux;               // kSlotCma: the sender's buffer address; kSlotPipe: the seq
                              // of the last message of its interleave group
};
static_assert(sizeof(SlotHeader) == 32);
inline constexpr size_t kSlotHeaderBytes = sizeof(SlotHeader);

struct alignas(kLineGroup) SegHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t nslots;
  uint32_t slot_bytes;
  uint32_t nchunks;
  uint32_t chunk_bytes;
  uint64_t total_bytes;
  uint64_t nonce;             // connection generation: the handshake repeats it
};

struct alignas(kLineGroup) SenderLine {
  std::atomic<uint64_t> chunk_head;     // chunks published
  std::atomic<uint64_t> cma_part_done;  // seq whose second half the sender wrote
  std::atomic<uint64_t> heartbeat;      // bumped at each liveness check
  std::atomic<uint32_t> closed;
};

struct alignas(kLineGroup) ReceiverLine {
  std::atomic<uint64_t> tail;           // slots consumed
  std::atomic<uint64_t> chunk_tail;     // chunks consumed
  std::atomic<uint64_t> cma_done;       // seq of the last CMA message fully received
  std::atomic<uint64_t> rdv_seq;        // CMA: seq whose destination is advertised
  std::atomic<uint64_t> rdv_addr;       //   receiver buffer address for that seq
  std::atomic<uint64_t> heartbeat;
  std::atomic<uint32_t> closed;
  std::atomic<uint32_t> cma_ok;         // receiver could process_vm_readv the sender
  std::atomic<uint64_t> posted;         // receive buffers posted so far: message seq <= posted
                                        // has a receive waiting (bounds interleave groups)
};

// Ring geometry; validated before any offset is derived from it. The fine cut is derived
// from the coarse one, so both sides agree: kFineChunkBytes chunks over a quarter of the
// ring (a power of two of them, at least 4), when the ring's chunks are multiples of
// kFineChunkBytes and larger; else none (fine_nchunks 0).
struct Layout {
  uint32_t nslots = 0, slot_bytes = 0, nchunks = 0, chunk_bytes = 0;
  uint32_t fine_nchunks = 0, fine_chunk_bytes = 0;
  size_t sender_off = 0, receiver_off = 0, slots_off = 0, chunks_off = 0, total = 0;
  size_t inline_max() const { return slot_bytes - kSlotHeaderBytes; }
  size_t ring_bytes() const { return size_t(nchunks) * chunk_bytes; }  // the coarse cut
};
Status layout_make(uint32_t nslots, uint32_t slot_bytes, uint32_t nchunks,
                   uint32_t chunk_bytes, Layout* out);

// 16 bytes identifying this boot (/proc/sys/kernel/random/boot_id).
Status host_boot_id(uint8_t out[16]);


// Provider context (one per zcx_provider_init_t).
struct Context {
  int rank = -1;
  int nranks = 0;
  uint64_t secret = 0;
  std::string host;
  uint8_t boot_id[16] = {};
};

struct Comm;

struct Request {
  Comm* comm = nullptr;
  bool is_send = false;
  bool done = false;
  int phase = 0;
  Status error = Status::kSuccess;
  uint64_t seq = 0;  // send: message seq + 1
  int8_t cma = -1;    // send: whether it goes by CMA, once decided (use_cma)
  // send
  const uint8_t* data = nullptr;
  size_t size = 0;
  int tag = 0;
  // recv
  int n = 0;
  int nfilled = 0;
  int cur = -1;          // buffer receiving a CMA message
  size_t cur_size = 0;   // its size
  uint64_t cur_seq = 0;
  uint64_t cur_addr = 0;
  uint8_t* bufs[kMaxRecvs] = {};
  size_t caps[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  size_t got[kMaxRecvs] = {};
  bool filled[kMaxRecvs] = {};
};

// An interleave group: pipelined messages whose chunks share the stream round-robin, one
// chunk each in turn, in message order. Both sides derive that order from the sizes alone.
// Members complete in message order, so that requests still complete in posting order.
struct GroupMember {
  Request* r = nullptr;
  int buf = 0;       // receiver: which buffer of r
  size_t size = 0;
  size_t off = 0;    // bytes streamed
};
struct Interleave {
  GroupMember m[kMaxGroup];
  int n = 0;
  int next = 0;      // member whose chunk is next in the stream
  int finished = 0;  // members completed (a prefix)
  bool streaming = false;  // receiver: copy out with non-temporal stores
  bool fine = false;       // cut in the fine chunks (else the ring's own)
  uint32_t nchunks = 0, chunk_bytes = 0;  // the cut's geometry
  // Sender, groups that measure their cut's rate: when the first chunk went out and the
  // receiver's chunk count then (start_ns 0: not started, or not measuring).
  bool measuring = false;
  int64_t start_ns = 0;
  uint64_t tail0 = 0;
  bool active() const { return finished < n; }
};

// FIFO of in-flight requests plus the pool they come from.
class RequestQueue {
 public:
  RequestQueue();
  Request* alloc();            // nullptr when kMaxRequests are live
  void release(Request* r);
  void push(Request* r) { q_[tail_++ % kMaxRequests] = r; }
  Request* front() const { return head_ == tail_ ? nullptr : q_[head_ % kMaxRequests]; }
  Request* at(size_t i) const { return q_[(head_ + i) % kMaxRequests]; }  // i < queued()
  void pop() { ++head_; }
  size_t queued() const { return static_cast<size_t>(tail_ - head_); }

 private:
  std::vector<Request> pool_;
  std::vector<Request*> free_;
  std::vector<Request*> q_;
  uint64_t head_ = 0, tail_ = 0;
};

// Sender, ZCX_SHM_LARGE=auto: CMA or the pipeline for a message larger than the chunk ring
// (ZCX_SHM_ADAPT_MIN), by the rate this process's own copies ran at lately on the
// connection with each, per size class (shm_copy.cc). Why: on a VM whose two vCPUs sit
// sometimes on one core complex and sometimes on two, the pipeline (its chunk ring moves
// every cache line between the cores twice) did 4-64 MiB at 23-30 GB/s near and 2.4-2.9
// GB/s far, CMA 8-25 GB/s in both (docs/PERFORMANCE.md). Copy rates are measured where they
// happen (the sender's memcpy into a chunk; its process_vm_writev half), so arms mixed in a
// window do not blur each other's figures.
struct LargeChooser {
  static constexpr int kClasses = 10;  // log2 size classes from adapt_min; the last is open
  struct Rate {
    double bytes = 0, ns = 0;  // a time-weighted window of copies
    int64_t at_ns = 0;         // last copy (0: never measured)
    bool trying = false;       // a message is out to measure it
  };
  Rate rate[kClasses][2];      // [class][1: CMA]
};

// Sender, ZCX_SHM_STREAM=auto: the cut a group streams in. Small chunks over a small ring
// move a window of 1 MiB messages a quarter faster while the two vCPUs share a core complex
// (each chunk and its buffer fit the L1, the ring the L2) and a fifth slower while they do
// not (each chunk's hand-over costs a 250 ns line transfer), and the placement changes while
// jobs run (docs/PERFORMANCE.md). So groups large enough to hit the ring's limit measure the
// rate the receiver drains their cut at, and each group takes the cut whose last groups'
// median rate is higher, trying the other one when it has not run for 100 ms.
struct CutChooser {
  static constexpr int kKeep = 5;  // groups remembered per cut
  struct Arm {
    double rate[kKeep] = {};  // bytes/ns of its last groups (a ring, count mod kKeep)
    int count = 0;
    int64_t at_ns = 0;        // the last group's end
    bool trying = false;      // a group is out to measure it
  };
  Arm arm[2];                 // [1: fine]
  bool ring_fine = false;     // the cut of the chunks in the ring now
  uint64_t switches = 0;      // times the ring changed cut (tests)
};

struct Comm {
  bool is_send = false;
  Context* ctx = nullptr;
  Layout layout;
  Mapping map;
  SegHeader* hdr = nullptr;
  SenderLine* sline = nullptr;
  ReceiverLine* rline = nullptr;
  uint8_t* slots = nullptr;
  uint8_t* chunks = nullptr;
  zcx_peer_info_t peer{};
  ProcessWatch watch;  // the peer process, through a pidfd (never through its memory)
  UniqueFd sock;              // handshake socket until the acceptor's answer arrived
  RequestQueue reqs;
  StickyError error;
  // Local copies of ring counters (the segment is re-read only when these run out).
  uint64_t head = 0;          // sender: slots published
  uint64_t tail = 0;          // receiver: slots consumed; sender: cached peer tail
  uint64_t chunk_head = 0;
  uint64_t chunk_tail = 0;
  uint64_t posted = 0;        // receiver: receive buffers posted (published in rline->posted)
  Interleave group;           // pipelined messages streaming now
  size_t chunk_budget = 0;    // chunks the progress call under way may still move
  bool cma_ok = false;        // sender: it may process_vm_writev into the receiver
  uint64_t cma_probe = 0;     // sender: word the acceptor reads to test CMA
  // Idle accounting for liveness/timeout checks and yielding.
  uint64_t spin_limit = 0;    // ZCX_SHM_SPIN, read once
  int64_t timeout_ms = 0;     // ZCX_TIMEOUT, read once
  LargeMode large = LargeMode::kAuto;
  size_t cma_min = 0;         // auto mode: CMA from this size up
  size_t adapt_min = 0;       // auto mode: chosen by the copy rates from this size up
  LargeChooser chooser;
  StreamCut cut = StreamCut::kAuto;
  CutChooser cuts;
  size_t stream_min = 0;      // copy-out with non-temporal stores from this size up
  uint64_t idle = 0;          // consecutive polls without progress
  bool progressed = false;    // set by the data path, consumed by progress()
  bool had_progress = false;  // progress since the last clock read
  int64_t last_check_ns = 0;
  int64_t last_progress_ns = 0;
};

struct ListenComm {
  Context* ctx = nullptr;
  UniqueFd sock;
  uint64_t nonce = 0;
  std::vector<UniqueFd> pending;  // accepted sockets whose hello has not arrived yet
};

// Parameters (shm_config.cc).
LargeMode large_mode();
StreamCut stream_cut();
size_t cma_threshold();
size_t cfg_adapt_min();
uint32_t cfg_nslots();
uint32_t cfg_slot_bytes();
uint32_t cfg_nchunks();
uint32_t cfg_chunk_bytes();
uint32_t cfg_spin_before_yield();
size_t cfg_stream_min();

// Connection set-up (shm_ep.cc).
Status listen(Context* ctx, void* handle, ListenComm** out);
Status connect(Context* ctx, const void* handle, Comm** out);
Status accept(ListenComm* lc, Comm** out);
Status comm_attach_views(Comm* c);

// Data path (shm_progress.cc, shm_interleave.cc, shm_copy.cc).
Status isend(Comm* c, const void* data, size_t size, int tag, Request** out);
Status irecv(Comm* c, int n, void** data, const size_t* sizes, const int* tags,
             Request** out);
Status test(Request* r, int* done, size_t* sizes);
// eager: the call inside isend/irecv, which moves at most one ring of chunks so that the
// post returns at once (and later posts can still join an interleave group).
Status progress(Comm* c, bool eager = false);
Status check_peer(Comm* c, int64_t now);
Status check_ack(Comm* c);
Status cma_read(Comm* c, void* dst, uint64_t src, size_t n);
Status cma_write(Comm* c, uint64_t dst, const void* src, size_t n);
// Pipelined messages (shm_interleave.cc). Sender: publishes the slots of the front request
// and of the pipelined sends queued behind it whose receives are posted, then streams them.
Status group_start(Comm* c);
Status group_stream(Comm* c);
// Receiver: the pipelined message in the slot at tail, with the group ending at `last`,
// cut as its slot type says.
Status group_begin(Comm* c, uint64_t last, bool fine);
Status group_drain(Comm* c);
// Ring access and checks shared by the data path's files (shm_progress.cc).
SlotHeader* slot_at(const Comm* c, uint64_t i);
uint8_t* chunk_at(const Comm* c, uint64_t i);  // in the current group's cut
Status corrupt(Comm* c, const char* what);
bool slot_free(Comm* c, uint64_t n = 1);  // sender: n more slots can be published
bool use_cma(Comm* c, Request* r);        // sender: r goes by CMA (decided once)
// Sender: a message of `size` is chosen by the copy rates (and its copies are timed).
inline bool adaptive(const Comm* c, size_t size) {
  return c->large == LargeMode::kAuto && size >= c->adapt_min && size < c->cma_min;
}
// Sender: `bytes` of an adaptive message of `size` copied by `cma` or the pipeline, from
// start_ns (now_ns()) until now.
void copy_rate(Comm* c, bool cma, size_t size, size_t bytes, int64_t start_ns);
// Sender: whether a group of `bytes` streams in the fine cut (*trial: to measure that cut);
// and whether a group of `bytes` measures its cut.
bool choose_fine(Comm* c, size_t bytes, bool* trial);
bool cut_measurable(const Comm* c, size_t bytes);
// Sender: a measuring group ended; the receiver drained `bytes` of it since start_ns (the
// caller clears the cut's `trying`, also for a group that measured nothing).
void cut_rate(Comm* c, bool fine, size_t bytes, int64_t start_ns);
// Receiver: the first buffer of r still free for `tag` (taken: buffers already claimed, or
// NULL) and large enough for `size`, else kMismatch / kInvalidUsage naming the peer.
Status match_buffer(Comm* c, const Request* r, int tag, uint64_t size, const bool* taken,
                    int* index);
void recv_finish(Comm* c, Request* r, int i, size_t size);
void slot_release(Comm* c, uint64_t n = 1);
std::string peer_name(const Comm* c);

}  // namespace zcx::shm
