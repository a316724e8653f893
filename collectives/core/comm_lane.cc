// The communicator's shared lane (core/shared_lane.h): set up on the first operation the
// selector sends there, then driven like any queued operation.
//
// Set-up is itself two ordinary collectives, so every member takes the same decision: rank
// 0 creates the segment and broadcasts where it is; each member maps it; an allreduce (min)
// of "mapped it" decides for all (and of "found the host oversubscribed", which the
// selector then reads the same on every member). Rank 0 then closes its fd: the segment
// has no name, so a member killed at any point leaves nothing behind in /dev/shm.
#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "core/comm.h"
#include "reduce/reduce.h"

#include <unistd.h>

#include <cstring>

namespace zcx::coll {
namespace {

const config::BoolParam kLaneParam(
    "ZCX_COLL_SHARED_LANE", true,
    "small collectives of a communicator on one host go through one shared segment (set-up "
    "agrees across members; 0 on any member turns it off for all)");

const config::SizeParam kBulkParam(
    "ZCX_COLL_SHARED_BULK", 8u << 20,
    "bytes of shared segment per communicator for the bulk lane, which carries collectives "
    "of more than 4 KiB per rank among ranks of one host (0 = none; must be the same on "
    "every rank)");

// What rank 0 broadcasts: where its segment is (ok = 0: it has none).
struct LaneOffer {
  uint64_t token = 0;
  int32_t pid = 0;
  int32_t fd = -1;
  int32_t ok = 0;
  int32_t reserved = 0;
};

}  // namespace

bool shared_lane_configured() { return kLaneParam.get(); }
size_t shared_lane_bulk_budget() { return kBulkParam.get(); }

bool Comm::lane_possible() const {
  return lane_state_ != LaneState::kSettingUp && lane_state_ != LaneState::kUnavailable &&
         nnodes_ == 1 && nranks() >= 2 && nranks() <= kSharedMaxRanks;
}

// The bulk lane's piece: the segment's once set up, else what the configuration asks for.
size_t Comm::lane_bulk_piece() const {
  if (lane_) return lane_->bulk_piece();
  if (lane_state_ != LaneState::kUntried) return 0;
  return shared_bulk_piece(nranks(), shared_lane_bulk_budget());
}

Status Comm::lane_setup() {
  const size_t bulk_piece = lane_bulk_piece();  // while untried: from the configuration
  lane_state_ = LaneState::kSettingUp;
  forget_choices();  // choices made from here on must not count on the lane
  LaneOffer offer;
  std::unique_ptr<SharedLane> lane;
  if (rank_ == 0 && ok(SharedLane::create(nranks(), bulk_piece, &lane)))
    offer = {lane->token(), static_cast<int32_t>(getpid()), lane->fd(), 1, 0};
  else if (rank_ == 0)
    ZCX_INFO(kLogColl, "comm '%s': no shared lane: %s", name_.c_str(), last_error());
  OpArgs a;
  a.kind = CollKind::kBroadcast;
  a.sendbuf = a.recvbuf = &offer;
  a.count = sizeof offer;
  a.dtype = ZCX_UINT8;
  a.root = 0;
  ZCX_TRY(run(a));  // queued: the lane is being set up
  int32_t mapped = offer.ok;
  if (rank_ != 0 && offer.ok) {
    mapped = ok(SharedLane::attach(offer.pid, offer.fd, offer.token, nranks(), bulk_piece, &lane));
    if (!mapped) ZCX_INFO(kLogColl, "comm '%s': no shared lane: %s", name_.c_str(), last_error());
  }
  if (!shared_lane_configured()) mapped = 0;
  // min over the members: whether all mapped it, and whether none found the host
  // oversubscribed (each reads the CPU masks itself; the selector needs one answer).
  int32_t all[2] = {mapped, oversubscribed_ ? 0 : 1};
  a = OpArgs();
  a.kind = CollKind::kAllreduce;
  a.sendbuf = a.recvbuf = all;
  a.count = 2;
  a.dtype = ZCX_INT32;
  a.op = ZCX_MIN;
  ZCX_TRY(run(a));  // queued: the lane is being set up
  if (lane) lane->close_fd();  // every member has mapped it or given up
  lane_state_ = all[0] ? LaneState::kReady : LaneState::kUnavailable;
  lane_oversubscribed_ = all[1] == 0;
  if (all[0]) lane_ = std::move(lane);
  forget_choices();
  ZCX_INFO(kLogTuning, "comm '%s': shared lane %s for %d ranks, bulk piece %zu bytes%s",
           name_.c_str(), all[0] ? "ready" : "unavailable (see above, or ZCX_COLL_SHARED_LANE=0)",
           nranks(), all[0] ? lane_->bulk_piece() : size_t{0},
           all[0] && lane_oversubscribed_ ? ", host oversubscribed" : "");
  return Status::kSuccess;
}

// si: what the planner chose from, so that the bulk lane takes exactly what it was chosen
// for (lane_progress refuses a bulk operation without rounds).
void Comm::lane_start(const OpArgs& a, const SelectInput& si, LaneOp* lo) {
  lo->args = a;
  lo->seq = ++lane_seq_;  // from 1: a zeroed slot holds no contribution
  fill_desc(a, Algo::kShared, &lo->desc);
  lo->desc_hash = desc_hash(lo->desc);
  stats_.count_op(a.kind, Algo::kShared, si.bytes);
  lo->bulk = shared_lane_bulk(si);
  if (!lo->bulk || !lane_ || lane_->bulk_piece() == 0) return;
  lo->rounds = bulk_rounds(a, lane_->bulk_piece());
  lo->step0 = bulk_step_;
  bulk_step_ += 2 * lo->rounds;
}

// A blocking shared-lane call on an idle communicator: the same steps as a queued lane
// operation, without the operation object, the queue, or the executor.
Status Comm::run(const OpArgs& args) {
  CommStats::Inside inside(stats_);  // blocking: all of its time
  if (lane_state_ == LaneState::kReady && queue_.empty() && args.kind != CollKind::kSendRecv &&
      !err_.has()) {
    refresh_tuning();
    OpArgs a = args;
    a.rank = rank_;
    a.nranks = nranks();
    const SelectInput si = select_input(a);
    if (choose(si).algo == Algo::kShared) {
      ZCX_TRY(claim_context());
      const CommStats::Posted posted = a.device < 0 ? stats_.posted() : CommStats::Posted{};
      Status st = run_lane(a, si);
      if (st == Status::kSuccess) stats_.finished(a.kind, Algo::kShared, posted);
      release_context_if_idle();
      return st;
    }
  }
  std::shared_ptr<Op> op;
  ZCX_TRY(post(args, &op));
  return wait(*op);
}

Status Comm::run_lane(const OpArgs& a, const SelectInput& si) {
  LaneOp lo;
  lane_start(a, si, &lo);
  WaitPacer pacer(spin_rounds(true));
  for (;;) {
    bool done = false;
    const uint64_t moves = lo.moves;
    Status st = lane_progress(lo, &done);
    if (st == Status::kSuccess && !done && lane_context_turn()) st = ctx_->progress();
    if (st != Status::kSuccess) {
      err_.record(st, last_error());
      ctx_->mark_unclean();
      return st;
    }
    if (done) {
      if (page_) page_->note_done(lo.desc.seq);
      break;
    }
    if (lo.moves != moves) pacer.moved();
    pacer.pause([&lo] { return lo.last_moved_ns(); });
  }
  void* avg_buf = nullptr;
  size_t avg_count = 0;
  if (avg_target(a, rank_, &avg_buf, &avg_count))
    finalize_avg(a.dtype, avg_buf, avg_count, nranks());
  return Status::kSuccess;
}

// While a lane operation waits, the context (listeners, other communicators' transfers) is
// driven only every 64th poll: a lane poll reads one line, a context pass costs far more.
bool Comm::lane_context_turn() { return ++lane_polls_ % 64 == 0; }

Status Comm::lane_progress(LaneOp& lo, bool* done) {
  *done = false;
  // Every 64th call, waiting or moving: a rank that moves nonstop (the last to reach each
  // bulk round never waits) must not look silent to a stalled peer (the executor's rule).
  if (++lo.polls % 64 == 0 && page_) page_->note_poll(now_ns());
  if (lo.joined) return bulk_progress(lo, done);
  if (lo.bulk && lo.rounds == 0)
    return set_error(Status::kInternal, kLogColl, "%s: sent to the shared lane, which has no "
                     "bulk lane", desc_describe(lo.desc).c_str());
  if (!lo.published) {
    const void* data = nullptr;
    size_t bytes = lo.bulk ? 0 : shared_contribution(lo.args, &data);
    lane_->publish(rank_, lo.seq, lo.desc, lo.desc_hash, data, bytes);
    lo.published = true;  // the clock is read only if a peer keeps us waiting
  }
  for (; lo.next < nranks(); ++lo.next) {
    if (lo.next == rank_) continue;
    uint64_t theirs = 0;
    if (!lane_->arrived(lo.next, lo.seq, &theirs)) return lane_stalled(lo, lo.next);
    if (theirs != lo.desc_hash) ZCX_TRY(lane_mismatch(lo, lo.next, lane_->desc(lo.next, lo.seq)));
    lo.idle = 0;
    ++lo.moves;
    lo.moved_ns = 0;  // stamped at the next stall
  }
  if (lo.bulk) {
    lo.joined = true;
    lo.next = 0;
    return bulk_progress(lo, done);
  }
  shared_finish(lo.args, *lane_, lo.seq);
  *done = true;
  return Status::kSuccess;
}

// kMismatch naming `peer` when its descriptor differs from ours in what matters.
Status Comm::lane_mismatch(const LaneOp& lo, int peer, const OpDesc& theirs) {
  std::string diff = desc_diff(lo.desc, theirs);
  if (diff.empty()) return Status::kSuccess;
  return set_error(Status::kMismatch, kLogColl, "%s: %s called a different operation: %s. %s",
                   desc_describe(lo.desc).c_str(), peer_name(peer).c_str(), diff.c_str(),
                   desc_mismatch_advice(lo.desc, theirs));
}

// Waiting for `peer`'s contribution. The clock is read once every 64 calls. A peer that
// announced this operation number for a different call is a mismatch at once; after a
// second, members on this host are checked for exit; after ZCX_TIMEOUT, a timeout.
Status Comm::lane_stalled(LaneOp& lo, int peer) {
  if (++lo.idle % 64 != 0) return Status::kSuccess;
  const int64_t now = now_ns();
  if (lo.moved_ns == 0) lo.moved_ns = now;
  OpDesc theirs;
  if (lane_->announced(peer, &theirs) && theirs.seq == lo.desc.seq)
    ZCX_TRY(lane_mismatch(lo, peer, theirs));
  if (now - lo.moved_ns > 1'000'000'000 && now >= lo.member_check_ns) {
    lo.member_check_ns = now + 500'000'000;
    const std::vector<int> dead = dead_members();
    if (!dead.empty())
      return set_error(Status::kRemote, kLogColl, "%s: %s died (its process exited); waiting "
                       "for %s in the shared lane%s", desc_describe(lo.desc).c_str(),
                       peer_names(dead).c_str(), peer_name(peer).c_str(),
                       stall_note(lo.desc.seq, lo.moved_ns).c_str());
  }
  if (now - lo.moved_ns <= timeout_ms_ * 1'000'000) return Status::kSuccess;
  return set_error(Status::kTimeout, kLogColl, "%s: no contribution from %s in the shared lane "
                   "for %.1f s (ZCX_TIMEOUT) — has that rank reached this operation, and is it "
                   "alive?%s%s", desc_describe(lo.desc).c_str(), peer_name(peer).c_str(),
                   timeout_ms_ / 1000.0, departed_note().c_str(),
                   stall_note(lo.desc.seq, lo.moved_ns).c_str());
}

}  // namespace zcx::coll
