// The bulk lane (core/shared_lane.h): an allreduce larger than a lane slot among the ranks
// of one host, in rounds of nranks pieces. In round k rank r
//   1. copies the pieces its peers own from its send buffer into its stage, signals 2k+1;
//   2. once every peer signalled 2k+1, reduces its own piece from its send buffer and the
//      peers' stages into its result area, signals 2k+2 (the piece is reduced by one rank
//      only, so every rank gets the same bits);
//   3. once every peer signalled 2k+2, copies every result area into its receive buffer.
// Stages and result areas are a few MiB that stay in the caches; of the user's buffers
// each byte is read once and written once, by non-temporal stores for large messages
// (ZCX_COLL_NT_MIN), so that memory sees little more than a copy's traffic.
// Why one stage per rank suffices: rank r rewrites its stage (step 1 of round k+1) only
// after it saw every peer's 2k+2, which a peer signals after its last read of r's stage in
// round k. It rewrites its result area (step 2 of k+1) only after every peer's 2(k+1)+1,
// which a peer signals after step 3 of round k, its last read of that area. The next
// operation starts with every member publishing in a lane slot, after its step 3.
#include "common/config.h"
#include "common/log.h"
#include "common/stream_copy.h"
#include "core/comm.h"
#include "reduce/reduce.h"

#include <algorithm>
#include <cstring>

namespace zcx::coll {
namespace {

const config::SizeParam kNtMinParam(
    "ZCX_COLL_NT_MIN", 16u << 20,
    "bulk-lane allreduces of at least this many bytes write the receive buffer with "
    "non-temporal stores (past the caches)");

enum BulkPhase : int { kCopyIn = 0, kAwaitInputs = 1, kAwaitResults = 2 };

// The elements of round `lo.round`: [first, first + total), split in pieces of q elements
// (the last round is split evenly, so that no rank gets all of a short tail).
struct RoundShape {
  size_t first = 0, total = 0, q = 0;
  size_t begin(int j) const { return std::min(total, q * static_cast<size_t>(j)); }
  size_t len(int j) const { return std::min(total, q * static_cast<size_t>(j + 1)) - begin(j); }
};

RoundShape round_shape(const LaneOp& lo, size_t piece_bytes, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t per_round = piece_bytes / lo.args.esize() * n;
  RoundShape s;
  s.first = lo.round * per_round;
  s.total = std::min(per_round, lo.args.count - s.first);
  s.q = (s.total + n - 1) / n;
  return s;
}

}  // namespace

void Comm::bulk_copy_in(const LaneOp& lo) {
  const size_t es = lo.args.esize(), piece = lane_->bulk_piece();
  const RoundShape s = round_shape(lo, piece, nranks());
  const auto* send = static_cast<const uint8_t*>(lo.args.sendbuf) + s.first * es;
  uint8_t* stage = lane_->bulk_stage(rank_);
  for (int j = 0; j < nranks(); ++j)
    if (j != rank_ && s.len(j) > 0) memcpy(stage + piece * j, send + s.begin(j) * es, s.len(j) * es);
}

// Reduces this rank's piece into its result area: its own input first, then the peers' in
// rank order.
void Comm::bulk_reduce(const LaneOp& lo) {
  const size_t es = lo.args.esize(), piece = lane_->bulk_piece();
  const RoundShape s = round_shape(lo, piece, nranks());
  const size_t len = s.len(rank_);
  if (len == 0) return;
  const void* acc = static_cast<const uint8_t*>(lo.args.sendbuf) + (s.first + s.begin(rank_)) * es;
  uint8_t* result = lane_->bulk_result(rank_);
  for (int j = 0; j < nranks(); ++j) {
    if (j == rank_) continue;
    reduce(lo.args.dtype, lo.args.op, result, acc, lane_->bulk_stage(j) + piece * rank_, len);
    acc = result;
  }
}

// In place, the receive buffer is the send buffer: this round's part of it was read (copy-in,
// reduction) before it is written here.
void Comm::bulk_copy_out(const LaneOp& lo) {
  const size_t es = lo.args.esize(), piece = lane_->bulk_piece();
  const RoundShape s = round_shape(lo, piece, nranks());
  const bool stream = lo.args.count * es >= kNtMinParam.get();
  auto* recv = static_cast<uint8_t*>(lo.args.recvbuf) + s.first * es;
  for (int j = 0; j < nranks(); ++j)
    if (s.len(j) > 0)
      copy_maybe_streaming(recv + s.begin(j) * es, lane_->bulk_result(j), s.len(j) * es, stream);
}

// Whether every peer finished `step`; the first one still missing is waited for (timeout,
// dead member, mismatch: lane_stalled).
Status Comm::bulk_await(LaneOp& lo, uint64_t step, bool* all) {
  *all = false;
  for (; lo.next < nranks(); ++lo.next) {
    if (lo.next == rank_) continue;
    if (!lane_->bulk_reached(lo.next, step)) return lane_stalled(lo, lo.next);
    lo.idle = 0;
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
        bulk_reduce(lo);
        lane_->bulk_signal(rank_, step + 2);
        lo.phase = kAwaitResults;
        break;
      default:
        ZCX_TRY(bulk_await(lo, step + 2, &all));
        if (!all) return Status::kSuccess;
        bulk_copy_out(lo);
        lo.phase = kCopyIn;
        ++lo.round;
        break;
    }
  }
  *done = true;
  return Status::kSuccess;
}

}  // namespace zcx::coll
