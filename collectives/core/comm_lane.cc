// The communicator's shared lane (core/shared_lane.h): set up on the first operation the
// selector sends there, then driven like any queued operation.
//
// Set-up is itself two ordinary collectives, so every member takes the same decision: rank
// 0 creates the segment and broadcasts where it is; each member maps it; an allreduce (min)
// of "mapped it" decides for all. Rank 0 then closes its fd: the segment has no name, so a
// member killed at any point leaves nothing behind in /dev/shm.
#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "core/comm.h"

#include <unistd.h>

#include <cstring>

namespace zcx::coll {
namespace {

const config::BoolParam kLaneParam(
    "ZCX_COLL_SHARED_LANE", true,
    "small collectives of a communicator on one host go through one shared segment (set-up "
    "agrees across members; 0 on any member turns it off for all)");

// What rank 0 broadcasts: where its segment is (ok = 0: it has none).
struct LaneOffer {
  uint64_t token = 0;
  int32_t pid = 0;
  int32_t fd = -1;
  int32_t ok = 0;
  int32_t reserved = 0;
};

}  // namespace

bool Comm::lane_possible() const {
  return lane_state_ != LaneState::kSettingUp && lane_state_ != LaneState::kUnavailable &&
         nnodes_ == 1 && nranks() >= 2 && nranks() <= kSharedMaxRanks;
}

Status Comm::run_now(const OpArgs& a) {
  std::shared_ptr<Op> op;
  ZCX_TRY(post(a, &op));
  return wait(*op);
}

Status Comm::lane_setup() {
  lane_state_ = LaneState::kSettingUp;
  choices_.clear();  // choices made from here on must not count on the lane
  LaneOffer offer;
  std::unique_ptr<SharedLane> lane;
  if (rank_ == 0 && ok(SharedLane::create(nranks(), &lane)))
    offer = {lane->token(), static_cast<int32_t>(getpid()), lane->fd(), 1, 0};
  else if (rank_ == 0)
    ZCX_INFO(kLogColl, "comm '%s': no shared lane: %s", name_.c_str(), last_error());
  OpArgs a;
  a.kind = CollKind::kBroadcast;
  a.sendbuf = a.recvbuf = &offer;
  a.count = sizeof offer;
  a.dtype = ZCX_UINT8;
  a.root = 0;
  ZCX_TRY(run_now(a));
  int32_t mapped = offer.ok;
  if (rank_ != 0 && offer.ok) {
    mapped = ok(SharedLane::attach(offer.pid, offer.fd, offer.token, nranks(), &lane));
    if (!mapped) ZCX_INFO(kLogColl, "comm '%s': no shared lane: %s", name_.c_str(), last_error());
  }
  if (!kLaneParam.get()) mapped = 0;
  int32_t all = mapped;
  a = OpArgs();
  a.kind = CollKind::kAllreduce;
  a.sendbuf = a.recvbuf = &all;
  a.count = 1;
  a.dtype = ZCX_INT32;
  a.op = ZCX_MIN;
  ZCX_TRY(run_now(a));
  if (lane) lane->close_fd();  // every member has mapped it or given up
  lane_state_ = all ? LaneState::kReady : LaneState::kUnavailable;
  if (all) lane_ = std::move(lane);
  choices_.clear();
  ZCX_INFO(kLogTuning, "comm '%s': shared lane %s for %d ranks", name_.c_str(),
           all ? "ready" : "unavailable (see above, or ZCX_COLL_SHARED_LANE=0)", nranks());
  return Status::kSuccess;
}

Status Comm::lane_progress(Op& op, bool* done) {
  *done = false;
  if (!op.lane_published) {
    const void* data = nullptr;
    size_t bytes = shared_contribution(op.args, &data);
    lane_->announce(rank_, op.desc);
    lane_->publish(rank_, op.lane_seq, op.desc, data, bytes);
    op.lane_published = true;  // the clock is read only if a peer keeps us waiting
  }
  for (; op.lane_next < nranks(); ++op.lane_next) {
    if (op.lane_next == rank_) continue;
    const OpDesc* theirs = lane_->arrived(op.lane_next, op.lane_seq);
    if (theirs == nullptr) return lane_stalled(op, op.lane_next);
    if (memcmp(theirs, &op.desc, sizeof op.desc) != 0) ZCX_TRY(lane_mismatch(op, op.lane_next, *theirs));
    op.lane_idle = 0;
    op.lane_moved_ns = 0;  // stamped at the next stall
  }
  shared_finish(op.args, *lane_, op.lane_seq);
  *done = true;
  return Status::kSuccess;
}

// kMismatch naming `peer` when its descriptor differs from ours in what matters.
Status Comm::lane_mismatch(const Op& op, int peer, const OpDesc& theirs) {
  std::string diff = desc_diff(op.desc, theirs);
  if (diff.empty()) return Status::kSuccess;
  return set_error(Status::kMismatch, kLogColl, "%s: %s called a different operation: %s",
                   desc_describe(op.desc).c_str(), peer_name(peer).c_str(), diff.c_str());
}

// Waiting for `peer`'s contribution. The clock is read once every 64 calls. A peer that
// announced this operation number for a different call is a mismatch at once; after a
// second, members on this host are checked for exit; after ZCX_TIMEOUT, a timeout.
Status Comm::lane_stalled(Op& op, int peer) {
  if (++op.lane_idle % 64 != 0) return Status::kSuccess;
  const int64_t now = now_ns();
  if (op.lane_moved_ns == 0) op.lane_moved_ns = now;
  OpDesc theirs;
  if (lane_->announced(peer, &theirs) && theirs.seq == op.desc.seq) ZCX_TRY(lane_mismatch(op, peer, theirs));
  if (now - op.lane_moved_ns > 1'000'000'000 && now >= op.lane_member_check_ns) {
    op.lane_member_check_ns = now + 500'000'000;
    const int dead = dead_member();
    if (dead >= 0)
      return set_error(Status::kRemote, kLogColl, "%s: %s died (its process exited); waiting "
                       "for %s in the shared lane", desc_describe(op.desc).c_str(),
                       peer_name(dead).c_str(), peer_name(peer).c_str());
  }
  if (now - op.lane_moved_ns <= timeout_ms_ * 1'000'000) return Status::kSuccess;
  return set_error(Status::kTimeout, kLogColl, "%s: no contribution from %s in the shared lane "
                   "for %.1f s (ZCX_TIMEOUT) — has that rank reached this operation, and is it "
                   "alive?", desc_describe(op.desc).c_str(), peer_name(peer).c_str(),
                   timeout_ms_ / 1000.0);
}

}  // namespace zcx::coll
