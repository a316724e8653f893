// Data path: irecv posts clear-to-send entries into the sender's FIFO; isend consumes them
// and RDMA-writes the payload (split over QPs or round-robin), each part ending in a WRITE
// WITH IMM; test polls the CQ and matches immediates to receives. Every field that came
// from the peer (CTS entries, immediates, sizes) is bounds-checked before use.
#include "ib/ib.h"

#include "common/config_vars.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <sched.h>

#include <atomic>
#include <cstring>

namespace zcx::ib {
namespace {

uint64_t load_acquire(const uint64_t* p) {
  return std::atomic_ref<const uint64_t>(*p).load(std::memory_order_acquire);
}

// Applies ZCX_IB_TEST_CORRUPT_CTS (tests only) to an entry about to be sent.
void corrupt_for_test(const std::string& mode, CtsEntry* e) {
  if (mode.empty()) return;
  if (mode == "rkey") e->rkey ^= 0x5a5a5a;
  if (mode == "addr") e->addr -= 64;
  if (mode == "size") e->size += 4096;
  if (mode == "seq") e->seq = e->seq_end = e->seq + 1000;
}

Status post_write(Comm* c, int qp, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(c->qps[qp], wr, &bad); rc != 0)
    return comm_fail(c, Status::kSystem, "ib: ibv_post_send to %s on %s failed: %s",
                     c->peer_desc.c_str(), c->dev->name.c_str(), errno_text(rc));
  return Status::kSuccess;
}

// Writes the n CTS entries of `slot` into the sender's FIFO (one RDMA WRITE on QP 0).
Status post_cts(RecvComm* c, int slot, int n) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(&c->cts_src[slot][0]),
              static_cast<uint32_t>(n * sizeof(CtsEntry)), c->cts_src_mr->mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kWrCts | static_cast<uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c->remote.buf_addr + static_cast<uint64_t>(slot) * sizeof(CtsSlot);
  wr.wr.rdma.rkey = c->remote.buf_rkey;
  return post_write(c, 0, &wr);
}

Status on_recv_imm(RecvComm* c, const ibv_wc& wc) {
  int qp = static_cast<int>(wc.wr_id & 0xff);
  if (qp < c->nqps) ZCX_TRY(post_recv_wrs(c, qp, 1));
  uint32_t imm = ntohl(wc.imm_data);
  int slot = imm & 0xff, idx = (imm >> 8) & 0x7, parts = (imm >> 11) & 0xf;
  Request& r = c->reqs[slot];
  bool sane = wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && r.kind == ReqKind::kRecv && idx < r.n &&
              parts >= 1 && parts <= c->nqps &&
              (r.parts_total[idx] == 0 || r.parts_total[idx] == parts) &&
              r.parts_seen[idx] < parts;
  if (!sane)
    return comm_fail(c, Status::kProtocol,
                     "ib: %s signalled a write (imm 0x%08x, opcode %d) that matches no posted "
                     "receive: protocol violation", c->peer_desc.c_str(), imm, wc.opcode);
  r.parts_total[idx] = parts;
  ++r.parts_seen[idx];
  return Status::kSuccess;
}

Status on_completion(Comm* c, const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) return wc_error(c, wc);
  c->last_progress_ns = now_ns();
  uint64_t kind = wc.wr_id & (0xffull << 56);
  uint64_t idx = wc.wr_id & 0xffffffffull;
  if (kind == kWrSend && c->is_send && idx < static_cast<uint64_t>(kSendReqs)) {
    Request& r = static_cast<SendComm*>(c)->reqs[idx];
    if (r.pending > 0) --r.pending;
    return Status::kSuccess;
  }
  if (kind == kWrRecv && !c->is_send) return on_recv_imm(static_cast<RecvComm*>(c), wc);
  if (kind == kWrFlush && !c->is_send && idx < static_cast<uint64_t>(kSlots)) {
    Request& r = static_cast<RecvComm*>(c)->flush_reqs[idx];
    if (r.pending > 0) --r.pending;
  }
  return Status::kSuccess;  // CTS writes: nothing to do
}

Status progress(Comm* c) {
  if (c->error.has()) return c->error.raise();
  ibv_wc wcs[16];
  for (int round = 0; round < 8; ++round) {
    int n = ibv_poll_cq(c->cq, 16, wcs);
    if (n < 0)
      return comm_fail(c, Status::kSystem, "ib: ibv_poll_cq on %s failed", c->dev->name.c_str());
    for (int i = 0; i < n; ++i) ZCX_TRY(on_completion(c, wcs[i]));
    if (n == 0 && round == 0 && c->poll_yield) sched_yield();
    if (n < 16) break;
  }
  return Status::kSuccess;
}

// Is the CTS entry `e` for sequence `want` in place? kInProgress while not yet written.
Status cts_ready(SendComm* c, const CtsEntry& e, uint64_t want) {
  uint64_t seq = load_acquire(&e.seq_end);
  uint64_t first = load_acquire(&e.seq);
  if (seq == want && first == want) return Status::kSuccess;
  uint64_t previous = want > kSlots ? want - kSlots : 0;
  if ((seq == previous || seq == want) && (first == previous || first == want))
    return Status::kInProgress;  // not posted yet, or being written right now
  return comm_fail(c, Status::kProtocol,
                   "ib: %s wrote a clear-to-send entry with sequence %llu where %llu was "
                   "expected: protocol violation, nothing sent",
                   c->peer_desc.c_str(), static_cast<unsigned long long>(seq),
                   static_cast<unsigned long long>(want));
}

// Bounds of the chosen CTS entry against our message.
Status cts_check(SendComm* c, const CtsEntry& e, size_t size) {
  if (e.size > kMaxMessage || (e.size > 0 && e.addr == 0) || e.addr + e.size < e.addr)
    return comm_fail(c, Status::kProtocol,
                     "ib: %s advertised an invalid receive buffer (addr 0x%llx, %llu bytes): "
                     "protocol violation, nothing sent", c->peer_desc.c_str(),
                     static_cast<unsigned long long>(e.addr), static_cast<unsigned long long>(e.size));
  if (size > e.size)
    return set_error(Status::kInvalidUsage, kLog,
                     "ib: message truncated: sending %zu bytes to %s, whose receive buffer "
                     "holds %llu", size, c->peer_desc.c_str(), static_cast<unsigned long long>(e.size));
  return Status::kSuccess;
}

// Posts the size record and the payload part(s) of one message.
Status post_message(SendComm* c, const CtsEntry& e, int slot, int idx, const uint8_t* data,
                    size_t size, const MrEntry* mr, Request* r) {
  int ridx = slot * kMaxRecvs + idx;
  int parts = 1, first_qp = static_cast<int>(c->msg_count++ % c->nqps);
  size_t chunk = size;
  if (c->split && c->nqps > 1 && size > 0) {
    chunk = (size + c->nqps - 1) / c->nqps;
    chunk = (chunk + kSplitAlign - 1) / kSplitAlign * kSplitAlign;
    parts = static_cast<int>((size + chunk - 1) / chunk);
    first_qp = 0;
  }
  c->size_src[ridx] = size;
  ibv_sge ssge{reinterpret_cast<uintptr_t>(&c->size_src[ridx]), 8, c->size_src_mr->mr->lkey};
  ibv_send_wr sw{};
  sw.sg_list = &ssge;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_RDMA_WRITE;
  sw.send_flags = c->max_inline >= 8 ? IBV_SEND_INLINE : 0;
  sw.wr.rdma.remote_addr = c->remote.buf_addr + static_cast<uint64_t>(ridx) * 8;
  sw.wr.rdma.rkey = c->remote.buf_rkey;
  ZCX_TRY(post_write(c, first_qp, &sw));
  r->pending = parts;
  size_t inline_max = std::min<size_t>(c->inline_bytes, c->max_inline);
  for (int p = 0; p < parts; ++p) {
    size_t off = static_cast<size_t>(p) * chunk, len = std::min(chunk, size - off);
    ibv_sge sge{reinterpret_cast<uintptr_t>(data + off), static_cast<uint32_t>(len),
                mr ? mr->mr->lkey : 0};
    ibv_send_wr wr{};
    wr.wr_id = kWrSend | static_cast<uint64_t>(ridx);
    wr.sg_list = &sge;
    wr.num_sge = len > 0 ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED | (len > 0 && len <= inline_max ? IBV_SEND_INLINE : 0);
    wr.imm_data = htonl(imm_encode(slot, idx, parts));
    wr.wr.rdma.remote_addr = e.addr + off;
    wr.wr.rdma.rkey = e.rkey;
    ZCX_TRY(post_write(c, parts > 1 ? p : first_qp, &wr));
  }
  return Status::kSuccess;
}

// The first unsent entry of the slot whose tag matches, or an error.
Status cts_pick(SendComm* c, int slot, uint64_t want, int tag, int* idx, int* nreqs) {
  const CtsSlot& s = c->fifo[slot];
  ZCX_TRY(cts_ready(c, s[0], want));
  *nreqs = static_cast<int>(s[0].nreqs);
  if (*nreqs < 1 || *nreqs > kMaxRecvs)
    return comm_fail(c, Status::kProtocol,
                     "ib: %s sent a clear-to-send group of %d buffers (1..%d allowed)",
                     c->peer_desc.c_str(), *nreqs, kMaxRecvs);
  for (int i = 0; i < *nreqs; ++i) ZCX_TRY(cts_ready(c, s[i], want));
  for (int i = 0; i < *nreqs; ++i) {
    if (c->matched[slot] & (1u << i) || s[i].tag != tag) continue;
    *idx = i;
    return Status::kSuccess;
  }
  return set_error(Status::kInvalidUsage, kLog,
                   "ib: send with tag %d to %s matches no buffer of its grouped receive",
                   tag, c->peer_desc.c_str());
}

Status request_timeout(Comm* c, const Request& r) {
  int64_t since = std::max(r.start_ns, c->last_progress_ns);
  if (now_ns() - since < c->timeout_ms * 1000000) return Status::kSuccess;
  return comm_fail(c, Status::kTimeout,
                   "ib: no progress with %s for ZCX_TIMEOUT (%.0f s) on a %s of %zu bytes",
                   c->peer_desc.c_str(), c->timeout_ms / 1000.0,
                   r.kind == ReqKind::kSend    ? "send"
                   : r.kind == ReqKind::kFlush ? "flush"
                                               : "receive",
                   r.sizes[0]);
}

// Done check; on done fills sizes and frees the request.
Status finish(Request* r, int* done, size_t* sizes) {
  if (r->kind == ReqKind::kSend || r->kind == ReqKind::kFlush) {
    if (r->pending > 0) return Status::kSuccess;
    if (sizes) sizes[0] = r->sizes[0];
  } else {
    auto* c = static_cast<RecvComm*>(r->comm);
    for (int i = 0; i < r->n; ++i)
      if (r->parts_total[i] == 0 || r->parts_seen[i] < r->parts_total[i]) return Status::kSuccess;
    for (int i = 0; i < r->n; ++i) {
      uint64_t got = c->sizes[r->index * kMaxRecvs + i];
      if (got > r->sizes[i])
        return comm_fail(c, Status::kProtocol,
                         "ib: %s reported %llu bytes for a %zu-byte receive buffer",
                         c->peer_desc.c_str(), static_cast<unsigned long long>(got), r->sizes[i]);
      if (sizes) sizes[i] = static_cast<size_t>(got);
    }
  }
  r->kind = ReqKind::kFree;
  *done = 1;
  return Status::kSuccess;
}

Status test_locked(Request* r, int* done, size_t* sizes) {
  Comm* c = r->comm;
  // A failure after r completed in this call (a later completion) waits for the next test.
  Status st = progress(c);
  ZCX_TRY(finish(r, done, sizes));
  if (*done) return Status::kSuccess;
  ZCX_TRY(st);
  std::string why;
  if (peer_gone(c, &why)) {
    ZCX_TRY(progress(c));  // its last completions may already be queued
    ZCX_TRY(finish(r, done, sizes));
    if (*done) return Status::kSuccess;
    return comm_fail(c, Status::kRemote,
                     "ib: peer %s closed its connection or died with a transfer in flight (%s)",
                     c->peer_desc.c_str(), why.c_str());
  }
  return request_timeout(c, *r);
}

}  // namespace

Status wc_error(Comm* c, const ibv_wc& wc) {
  const char* what = ibv_shim_wc_status_str(wc.status);
  if (wc.status == IBV_WC_RETRY_EXC_ERR) {
    double per_try = 4.096e-6 * static_cast<double>(1ull << params::timeout.get());
    double total = per_try * static_cast<double>(params::retry_cnt.get() + 1);
    return comm_fail(c, Status::kRemote,
                     "ib: peer %s unreachable or dead: retries exhausted after ~%.1f s "
                     "(status 12, %s; ZCX_IB_TIMEOUT=%lld, ZCX_IB_RETRY_CNT=%lld) on %s; check "
                     "link, GID index (%d = %s), MTU",
                     c->peer_desc.c_str(), total, what,
                     static_cast<long long>(params::timeout.get()),
                     static_cast<long long>(params::retry_cnt.get()), c->dev->name.c_str(),
                     c->dev->gid_index, gid_string(c->dev->gid).c_str());
  }
  const char* hint = "";
  if (wc.status == IBV_WC_REM_ACCESS_ERR || wc.status == IBV_WC_REM_INV_REQ_ERR)
    hint = "; the peer's buffer address/key is outside what it registered (remote access "
           "refused, nothing written)";
  else if (wc.status == IBV_WC_LOC_PROT_ERR || wc.status == IBV_WC_LOC_LEN_ERR)
    hint = "; a local buffer is not covered by its registration";
  else if (wc.status == IBV_WC_WR_FLUSH_ERR)
    hint = "; the queue pair was already in error (an earlier failure or the peer reset it)";
  return comm_fail(c, Status::kRemote,
                   "ib: transfer with peer %s failed on %s: status %d (%s), opcode %d, %u bytes, "
                   "vendor error 0x%x%s",
                   c->peer_desc.c_str(), c->dev->name.c_str(), wc.status, what, wc.opcode,
                   wc.byte_len, wc.vendor_err, hint);
}

namespace {
// The arguments irecv and iflush share: a comm, 1..kMaxRecvs buffers, their arrays.
Status check_recv_args(const char* what, const RecvComm* c, int n, void** data, size_t* sizes,
                       void** mhandles, void** request) {
  if (c == nullptr || request == nullptr || n < 1 || n > kMaxRecvs || data == nullptr ||
      sizes == nullptr || mhandles == nullptr)
    return set_error(Status::kInvalidArg, kLog, "ib: %s: bad arguments (n=%d, 1..%d)", what, n,
                     kMaxRecvs);
  return Status::kSuccess;
}
}  // namespace

zcx_status_t irecv(void* vcomm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** request) {
  auto* c = static_cast<RecvComm*>(vcomm);
  ZCX_IB_TRY_C(check_recv_args("irecv", c, n, data, sizes, mhandles, request));
  std::lock_guard<std::mutex> lock(c->mu);
  *request = nullptr;
  ZCX_IB_TRY_C(progress(c));
  for (int i = 0; i < n; ++i) ZCX_IB_TRY_C(mr_check(mhandles[i], data[i], sizes[i], "receive"));
  int slot = static_cast<int>(c->seq % kSlots);
  Request& r = c->reqs[slot];
  if (r.kind != ReqKind::kFree) return ZCX_SUCCESS;  // all slots busy: retry later
  r = Request{};
  r.kind = ReqKind::kRecv;
  r.comm = c;
  r.index = slot;
  r.n = n;
  r.start_ns = now_ns();
  uint64_t seq = c->seq + 1;
  for (int i = 0; i < n; ++i) {
    r.sizes[i] = sizes[i];
    const auto* mr = static_cast<const MrEntry*>(mhandles[i]);
    c->cts_src[slot][i] = CtsEntry{seq, reinterpret_cast<uintptr_t>(data[i]), sizes[i],
                                   mr ? mr->mr->rkey : 0, tags ? tags[i] : 0,
                                   static_cast<uint32_t>(n), static_cast<uint32_t>(i), {0, 0}, seq};
    corrupt_for_test(c->test_corrupt, &c->cts_src[slot][i]);
  }
  Status s = post_cts(c, slot, n);
  if (!ok(s)) {
    r.kind = ReqKind::kFree;
    return to_c(s);
  }
  ++c->seq;
  *request = &r;
  return ZCX_SUCCESS;
}

zcx_status_t isend(void* vcomm, void* data, size_t size, int tag, void* mhandle, void** request) {
  auto* c = static_cast<SendComm*>(vcomm);
  if (c == nullptr || request == nullptr || (size > 0 && data == nullptr) || size > kMaxMessage)
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: isend: bad arguments (%zu bytes)", size));
  std::lock_guard<std::mutex> lock(c->mu);
  *request = nullptr;
  ZCX_IB_TRY_C(progress(c));
  ZCX_IB_TRY_C(mr_check(mhandle, data, size, "send"));
  int slot = static_cast<int>(c->seq % kSlots), idx = 0, nreqs = 0;
  Status s = cts_pick(c, slot, c->seq + 1, tag, &idx, &nreqs);
  if (s == Status::kInProgress) {
    std::string why;
    if (!peer_gone(c, &why)) {  // receiver not ready: retry later
      if (c->poll_yield) sched_yield();
      return ZCX_SUCCESS;
    }
    return to_c(comm_fail(c, Status::kRemote, "ib: peer %s closed its connection or died (%s)",
                          c->peer_desc.c_str(), why.c_str()));
  }
  ZCX_IB_TRY_C(s);
  const CtsEntry& e = c->fifo[slot][idx];
  ZCX_IB_TRY_C(cts_check(c, e, size));
  Request& r = c->reqs[slot * kMaxRecvs + idx];
  if (r.kind != ReqKind::kFree) return ZCX_SUCCESS;  // previous use not tested yet
  r = Request{};
  r.kind = ReqKind::kSend;
  r.comm = c;
  r.index = slot * kMaxRecvs + idx;
  r.sizes[0] = size;
  r.start_ns = now_ns();
  ZCX_IB_TRY_C(post_message(c, e, slot, idx, static_cast<const uint8_t*>(data), size,
                            static_cast<const MrEntry*>(mhandle), &r));
  c->matched[slot] |= static_cast<uint8_t>(1u << idx);
  if (c->matched[slot] == (1u << nreqs) - 1) {
    c->matched[slot] = 0;
    ++c->seq;
  }
  *request = &r;
  return ZCX_SUCCESS;
}

namespace {
// The flush QP, its host word and requests, made at the first iflush of a comm.
Status flush_setup(RecvComm* c) {
  if (c->flush_qp != nullptr) return Status::kSuccess;
  c->flush_sink = std::make_unique<uint64_t>(0);
  c->flush_reqs = std::make_unique<Request[]>(kSlots);
  ZCX_TRY(mr_register(c->dev, c->flush_sink.get(), sizeof(uint64_t), ZCX_MEM_HOST,
                      &c->flush_sink_mr));
  return flush_qp_create(c);
}
}  // namespace

// NCCL's rule: reads one byte of the last non-empty buffer of a completed receive back into
// host memory; when the read completes, the NIC's earlier writes to that memory have landed.
// No request (NULL) when every buffer was empty.
zcx_status_t iflush(void* vcomm, int n, void** data, size_t* sizes, void** mhandles,
                    void** request) {
  auto* c = static_cast<RecvComm*>(vcomm);
  ZCX_IB_TRY_C(check_recv_args("iflush", c, n, data, sizes, mhandles, request));
  std::lock_guard<std::mutex> lock(c->mu);
  *request = nullptr;
  int last = n - 1;
  while (last >= 0 && sizes[last] == 0) --last;
  if (last < 0) return ZCX_SUCCESS;
  ZCX_IB_TRY_C(mr_check(mhandles[last], data[last], sizes[last], "flush"));
  ZCX_IB_TRY_C(progress(c));
  ZCX_IB_TRY_C(flush_setup(c));
  const int idx = static_cast<int>(c->flush_seq % kSlots);
  Request& r = c->flush_reqs[idx];
  if (r.kind != ReqKind::kFree) return ZCX_SUCCESS;  // all busy: the caller retries
  r = Request{};
  r.kind = ReqKind::kFlush, r.comm = c, r.index = idx, r.pending = 1, r.start_ns = now_ns();
  ibv_sge sge{reinterpret_cast<uintptr_t>(c->flush_sink.get()), 1, c->flush_sink_mr->mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kWrFlush | static_cast<uint64_t>(idx);
  wr.sg_list = &sge, wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(data[last]);
  wr.wr.rdma.rkey = static_cast<const MrEntry*>(mhandles[last])->mr->rkey;
  if (int rc = ibv_post_send(c->flush_qp, &wr, &bad); rc != 0) {
    r.kind = ReqKind::kFree;
    return to_c(comm_fail(c, Status::kSystem, "ib: posting the flush read on %s failed: %s",
                          c->dev->name.c_str(), errno_text(rc)));
  }
  ++c->flush_seq;
  *request = &r;
  return ZCX_SUCCESS;
}

zcx_status_t test(void* vreq, int* done, size_t* sizes) {
  auto* r = static_cast<Request*>(vreq);
  if (r == nullptr || done == nullptr || r->kind == ReqKind::kFree || r->comm == nullptr)
    return to_c(set_error(Status::kInvalidArg, kLog, "ib: test: not a live request"));
  *done = 0;
  std::lock_guard<std::mutex> lock(r->comm->mu);
  Status s = test_locked(r, done, sizes);
  if (failed(s)) r->kind = ReqKind::kFree;  // a failed request is dead
  return to_c(s);
}

}  // namespace zcx::ib
