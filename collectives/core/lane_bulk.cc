// The bulk lane (core/shared_lane.h): collectives larger than a lane slot among the ranks of
// one host, in rounds. Every round has the same three steps on every rank; for an allreduce,
// rank r in round k
//   1. copies the pieces its peers own from its send buffer into its stage, signals 2k+1;
//   2. once every peer signalled 2k+1, reduces its own piece from its send buffer and the
//      peers' stages into its result area, copies that into its receive buffer, signals
//      2k+2 (the piece is reduced by one rank only, so every rank gets the same bits);
//   3. once every peer signalled 2k+2, copies the peers' result areas into its receive
//      buffer.
//      Except after the last round, step 3 runs inside step 1 of round k+1, the two sets of
//      copies interleaved in slices: the stage copies read the user's send buffer, the
//      result copies write its receive buffer, so memory serves reads and writes at once
//      (as in a memcpy) instead of one phase of each (+5-10% at 32-256 MiB).
// A reduce is the same with the copies into the receive buffer on the root only. A
// reducescatter reduces its own block's piece straight into its receive buffer in step 2;
// an allgather and a broadcast copy the stages out in step 2 (a broadcast only stages the
// root's data). Stages and result areas are a few MiB that stay in the caches; of the
// user's buffers each byte is read once and written once, with non-temporal stores for
// large outputs (ZCX_COLL_NT_MIN), so that memory sees little more than a copy's traffic.
//
// Why one stage per rank suffices: rank r rewrites its stage (step 1 of round k+1) only
// after it saw every peer's 2k+2, which a peer signals after its last read of r's stage in
// round k. It rewrites its result area (step 2 of k+1) only after every peer's 2(k+1)+1,
// which a peer signals after step 3 of round k (folded into its step 1 of round k+1), its
// last read of that area. The next operation starts with every member publishing in a lane
// slot, after its last step 3.
#include "common/config.h"
#include "common/log.h"
#include "common/stream_copy.h"
#include "core/comm.h"
#include "reduce/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace zcx::coll {
namespace {

const config::SizeParam kNtMinParam(
    "ZCX_COLL_NT_MIN", 16u << 20,
    "bulk-lane collectives whose output is at least this many bytes write the receive buffer "
    "with non-temporal stores (past the caches)");

enum BulkPhase : int { kCopyIn = 0, kAwaitInputs = 1, kAwaitResults = 2 };

// Elements a round covers: of the vector (allreduce, reduce, broadcast), of every rank's
// block (allgather: as much as a stage holds; reducescatter: one piece of every block).
size_t round_elems(CollKind kind, size_t piece_bytes, size_t esize, int nranks) {
  const size_t piece = piece_bytes / esize;
  return kind == CollKind::kReducescatter ? piece : piece * static_cast<size_t>(nranks);
}

// The elements of round `lo.round`: [first, first + total), split in pieces of q elements
// (the last round is split evenly, so that no rank gets all of a short tail).
struct RoundShape {
  size_t first = 0, total = 0, q = 0;
  size_t begin(int j) const { return std::min(total, q * static_cast<size_t>(j)); }
  size_t len(int j) const { return std::min(total, q * static_cast<size_t>(j + 1)) - begin(j); }
};

RoundShape round_shape(const OpArgs& a, size_t round, size_t piece_bytes, int nranks) {
  const size_t per_round = round_elems(a.kind, piece_bytes, a.esize(), nranks);
  RoundShape s;
  s.first = round * per_round;
  s.total = std::min(per_round, a.count - s.first);
  s.q = (s.total + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks);
  return s;
}

RoundShape round_shape(const LaneOp& lo, size_t piece_bytes, int nranks) {
  return round_shape(lo.args, lo.round, piece_bytes, nranks);
}

bool reduces(CollKind k) {
  return k == CollKind::kAllreduce || k == CollKind::kReduce || k == CollKind::kReducescatter;
}

// Whether an operation whose receive buffer takes `output_bytes` writes it past the caches.
bool streams(size_t output_bytes) { return output_bytes >= kNtMinParam.get(); }

// The same for an allreduce's or a reduce's results, never in place: there the receive buffer
// is this rank's input, whose lines its stage copies and reduction read moments before, and a
// non-temporal store to a cached line first evicts it. (A/B, in-place busbw, 4 ranks:
// streamed 3.85-4.01 GB/s at 16 MiB, 3.76-3.88 at 64 MiB; cached 4.79-4.97 and 3.96-4.50;
// level at 256 MiB; docs/PERFORMANCE.md. Out of place, streaming gains 20-30% from 64 MiB.)
bool streams_results(const OpArgs& a) {
  return a.recvbuf != a.sendbuf && streams(a.count * a.esize());
}

void copy(void* dst, const void* src, size_t n, bool stream) {
  if (dst != src && n > 0) copy_maybe_streaming(dst, src, n, stream);  // in place: nothing
}

// Byte copies done a slice at a time, so that two lists can share one pass.
class CopyList {
 public:
  void add(void* dst, const void* src, size_t n, bool stream) {
    if (n == 0 || dst == src) return;  // in place: nothing
    segs_.push_back({static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n, stream});
    total_ += n;
  }
  size_t total() const { return total_; }
  bool done() const { return at_ == segs_.size(); }
  void advance(size_t bytes) {
    while (bytes > 0 && at_ < segs_.size()) {
      const Seg& s = segs_[at_];
      const size_t n = std::min(bytes, s.n - off_);
      copy_maybe_streaming(s.dst + off_, s.src + off_, n, s.stream);
      off_ += n;
      bytes -= n;
      if (off_ == s.n) {
        ++at_;
        off_ = 0;
      }
    }
  }

 private:
  struct Seg {
    uint8_t* dst;
    const uint8_t* src;
    size_t n;
    bool stream;
  };
  std::vector<Seg> segs_;
  size_t total_ = 0, at_ = 0, off_ = 0;
};

// Step 1's copies: what this rank's peers need from its send buffer, into its stage.
void stage_copies(const SharedLane& lane, int rank, int nranks, const LaneOp& lo,
                  CopyList* in) {
  const OpArgs& a = lo.args;
  const size_t es = a.esize(), piece = lane.bulk_piece();
  const RoundShape s = round_shape(lo, piece, nranks);
  const auto* send = static_cast<const uint8_t*>(a.sendbuf);
  uint8_t* stage = lane.bulk_stage(rank);
  switch (a.kind) {
    case CollKind::kBroadcast:
      if (rank == a.root) in->add(stage, send + s.first * es, s.total * es, false);
      return;
    case CollKind::kAllgather: in->add(stage, send + s.first * es, s.total * es, false); return;
    case CollKind::kReducescatter:
      for (int j = 0; j < nranks; ++j)
        if (j != rank)
          in->add(stage + piece * j, send + (a.count * j + s.first) * es, s.total * es, false);
      return;
    default:
      for (int j = 0; j < nranks; ++j)
        if (j != rank)
          in->add(stage + piece * j, send + (s.first + s.begin(j)) * es, s.len(j) * es, false);
  }
}

// Whether this rank copies result areas into its receive buffer: an allreduce's every rank,
// a reduce's root.
bool takes_results(const OpArgs& a, int rank) {
  return a.kind == CollKind::kReduce ? rank == a.root : a.kind == CollKind::kAllreduce;
}

// Step 3's copies of `round`: the peers' result areas into the receive buffer (its own went
// in step 2, see Comm::bulk_copy_own).
void result_copies(const SharedLane& lane, int rank, int nranks, const LaneOp& lo,
                   size_t round, CopyList* out) {
  const OpArgs& a = lo.args;
  if (!takes_results(a, rank)) return;
  const size_t es = a.esize();
  const RoundShape s = round_shape(a, round, lane.bulk_piece(), nranks);
  const bool stream = streams_results(a);
  auto* recv = static_cast<uint8_t*>(a.recvbuf) + s.first * es;
  for (int j = 0; j < nranks; ++j)
    if (j != rank) out->add(recv + s.begin(j) * es, lane.bulk_result(j), s.len(j) * es, stream);
}

// Runs two copy lists in alternating slices, in proportion to their sizes. The stage
// copies read the user's send buffer and write cached lines; the result copies read cached
// lines and write the receive buffer past the caches: together, memory sees reads and
// writes at once, as in a memcpy, instead of a phase of each.
void interleave(CopyList& in, CopyList& out) {
  constexpr size_t kSlice = 32 << 10;
  if (in.total() == 0 || out.total() == 0) {
    in.advance(SIZE_MAX);
    out.advance(SIZE_MAX);
    return;
  }
  const size_t out_slice =
      std::max<size_t>(4096, kSlice * out.total() / in.total() / 4096 * 4096);
  while (!in.done() || !out.done()) {
    in.advance(kSlice);
    out.advance(out_slice);
  }
}

}  // namespace

size_t bulk_rounds(const OpArgs& a, size_t piece_bytes) {
  const size_t per_round = round_elems(a.kind, piece_bytes, a.esize(), a.nranks);
  return (a.count + per_round - 1) / per_round;
}

// Step 1 of round k, with step 3 of round k-1 folded in (see interleave). That is safe: a
// peer rewrites its result area in step 2 of round k, after this rank's signal 2k+1.
void Comm::bulk_copy_in(const LaneOp& lo) {
  CopyList in, out;
  stage_copies(*lane_, rank_, nranks(), lo, &in);
  if (lo.round > 0) result_copies(*lane_, rank_, nranks(), lo, lo.round - 1, &out);
  interleave(in, out);
}

// Reduces this rank's piece: its own input first, then the peers' in rank order; into its
// result area (allreduce, reduce) or its receive buffer (reducescatter, which may be its
// own input exactly: in place).
void Comm::bulk_reduce(const LaneOp& lo) {
  const OpArgs& a = lo.args;
  const size_t es = a.esize(), piece = lane_->bulk_piece();
  const RoundShape s = round_shape(lo, piece, nranks());
  const bool rs = a.kind == CollKind::kReducescatter;
  const size_t len = rs ? s.total : s.len(rank_);
  if (len == 0) return;
  const size_t own = rs ? a.count * rank_ + s.first : s.first + s.begin(rank_);
  const void* acc = static_cast<const uint8_t*>(a.sendbuf) + own * es;
  uint8_t* out = rs ? static_cast<uint8_t*>(a.recvbuf) + s.first * es : lane_->bulk_result(rank_);
  for (int j = 0; j < nranks(); ++j) {
    if (j == rank_) continue;
    reduce(a.dtype, a.op, out, acc, lane_->bulk_stage(j) + piece * rank_, len);
    acc = out;
  }
}

// Step 2's end for a rank that takes results: its own result area into its receive buffer
// while the lines are its own and hot, before it signals. In place, that part of the buffer
// was this rank's input, which only it reads and which its reduction has consumed. (A/B at
// 2 MiB, 2 ranks, busbw: copied with the peers' results in step 3, 9.4-10.5 GB/s; after the
// signal, while peers read the area, 10.3-11.4; before it, 12.8-15.2. Level at 32-256 MiB.)
void Comm::bulk_copy_own(const LaneOp& lo) {
  const OpArgs& a = lo.args;
  if (!takes_results(a, rank_)) return;
  const size_t es = a.esize();
  const RoundShape s = round_shape(lo, lane_->bulk_piece(), nranks());
  auto* recv = static_cast<uint8_t*>(a.recvbuf) + (s.first + s.begin(rank_)) * es;
  copy(recv, lane_->bulk_result(rank_), s.len(rank_) * es, streams_results(a));
}

// Step 2 of an allgather or a broadcast: every stage (the root's) into the receive buffer.
void Comm::bulk_gather(const LaneOp& lo) {
  const OpArgs& a = lo.args;
  const size_t es = a.esize();
  const RoundShape s = round_shape(lo, lane_->bulk_piece(), nranks());
  // A broadcast's non-root may pass no send buffer: only the root's own copy reads it.
  const auto* send = static_cast<const uint8_t*>(a.sendbuf);
  auto* recv = static_cast<uint8_t*>(a.recvbuf);
  if (a.kind == CollKind::kBroadcast) {
    const bool stream = streams(a.count * es);
    const uint8_t* from = rank_ == a.root ? send + s.first * es : lane_->bulk_stage(a.root);
    copy(recv + s.first * es, from, s.total * es, stream);
    return;
  }
  const bool stream = streams(a.count * es * nranks());
  for (int j = 0; j < nranks(); ++j)
    copy(recv + (a.count * j + s.first) * es,
         j == rank_ ? send + s.first * es : lane_->bulk_stage(j), s.total * es, stream);
}

// Step 3 of the last round (the earlier ones run within the next round's step 1).
void Comm::bulk_copy_out(const LaneOp& lo) {
  CopyList out;
  result_copies(*lane_, rank_, nranks(), lo, lo.round, &out);
  out.advance(SIZE_MAX);
}

// Whether every peer finished `step`; the first one still missing is waited for (timeout,
// dead member, mismatch: lane_stalled).
Status Comm::bulk_await(LaneOp& lo, uint64_t step, bool* all) {
  *all = false;
  for (; lo.next < nranks(); ++lo.next) {
    if (lo.next == rank_) continue;
    if (!lane_->bulk_reached(lo.next, step)) return lane_stalled(lo, lo.next);
    lo.idle = 0;
    ++lo.moves;
    lo.moved_ns = 0;
  }
  lo.next = 0;
  *all = true;
  return Status::kSuccess;
}

Status Comm::bulk_progress(LaneOp& lo, bool* done) {
  *done = false;
  while (lo.round < lo.rounds) {
    const uint64_t step = lo.step0 + 2 * lo.round;
    bool all = false;
    switch (lo.phase) {
      case kCopyIn:
        bulk_copy_in(lo);
        lane_->bulk_signal(rank_, step + 1);
        lo.phase = kAwaitInputs;
        break;
      case kAwaitInputs:
        ZCX_TRY(bulk_await(lo, step + 1, &all));
        if (!all) return Status::kSuccess;
        if (reduces(lo.args.kind)) bulk_reduce(lo);
        else bulk_gather(lo);
        bulk_copy_own(lo);
        lane_->bulk_signal(rank_, step + 2);
        lo.phase = kAwaitResults;
        break;
      default:
        ZCX_TRY(bulk_await(lo, step + 2, &all));
        if (!all) return Status::kSuccess;
        if (lo.round + 1 == lo.rounds) bulk_copy_out(lo);
        lo.phase = kCopyIn;
        ++lo.round;
        break;
    }
  }
  *done = true;
  return Status::kSuccess;
}

}  // namespace zcx::coll
