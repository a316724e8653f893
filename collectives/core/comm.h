// The communicator: an ordered group of context ranks that run collectives together.
// Operations are queued and run one at a time in issue order (their messages to a peer must
// not interleave with the next operation's); request-based calls return at once and are
// driven by test/wait. Connections are made on first use (PeerLinks::endpoint). The first
// failure is sticky: later operations fail with it (zcx_comm_get_async_error).
// One thread at a time per communicator.
#pragma once

#include "algorithms/algorithms.h"
#include "base/context.h"
#include "common/proc_watch.h"
#include "core/desc.h"
#include "core/shared_lane.h"
#include "schedule/executor.h"
#include "schedule/schedule.h"
#include "select/select.h"

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace zcx::coll {

struct Op {
  Op(zcx_dtype_t dtype, zcx_redop_t redop) : sched(dtype, redop) {}
  OpDesc desc;
  Schedule sched;
  std::unique_ptr<Executor> exec;
  void* avg_buf = nullptr;  // avg: divide this many elements by nranks once done
  size_t avg_count = 0;
  // Shared-lane operations (no schedule): the call, the lane sequence number, progress.
  bool lane = false;
  OpArgs args;
  uint64_t lane_seq = 0;
  bool lane_published = false;
  int lane_next = 0;            // first member whose contribution has not been seen
  uint32_t lane_idle = 0;
  int64_t lane_moved_ns = 0;
  int64_t lane_member_check_ns = 0;
  bool done = false;
  Status result = Status::kSuccess;
};

class Comm final : public PeerLinks {
 public:
  // ctx is borrowed unless owned is set (then ctx == owned.get()). world: the context rank of
  // every communicator rank. id: equal on every member, distinct between communicators.
  static Status create(Context* ctx, std::unique_ptr<Context> owned, std::vector<int> world,
                       int rank, uint64_t id, std::string name, std::unique_ptr<Comm>* out);
  ~Comm() override;

  int rank() const { return rank_; }
  int nranks() const { return static_cast<int>(world_.size()); }
  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  size_t connections() const;  // endpoints made so far (lazy connection tests)

  // Plans (selects the algorithm, builds the schedule) and queues one operation.
  Status post(const OpArgs& args, std::shared_ptr<Op>* op);
  // Queues point-to-point calls as one operation (a group).
  Status post_group(const std::vector<OpArgs>& calls, std::shared_ptr<Op>* op);
  Status test(Op& op, bool* done);
  Status wait(Op& op);  // bounded: every executor times out after ZCX_TIMEOUT idle
  Status split(int color, int key, std::unique_ptr<Comm>* out);
  // Waits for every queued operation (bounded: each fails after ZCX_TIMEOUT without progress).
  Status drain();
  void abort();
  Status async_error() const { return err_.has() ? err_.status() : Status::kSuccess; }

  // PeerLinks
  Status endpoint(int peer, Endpoint** ep) override;
  Context& context() override { return *ctx_; }
  std::string peer_name(int peer) const override;
  int dead_member() override;

 private:
  Comm() = default;
  Status plan(const OpArgs& args, Op* op);
  Status plan_lane(const OpArgs& a, Op* op);
  void fill_desc(const OpArgs& a, Algo algo, OpDesc* out);
  const Choice& choose(const SelectInput& in);
  void refresh_tuning();
  Status progress();
  void fail_queue(Status st);
  void index_hosts();
  Status check_usable();
  int64_t last_activity_ns() const;  // when the running operation last moved
  // The shared lane (comm_lane.cc).
  bool lane_possible() const;
  Status lane_setup();
  Status run_now(const OpArgs& a);
  Status lane_progress(Op& op, bool* done);
  Status lane_stalled(Op& op, int peer);
  Status lane_mismatch(const Op& op, int peer, const OpDesc& theirs);

  Context* ctx_ = nullptr;
  std::unique_ptr<Context> owned_ctx_;
  std::vector<int> world_;
  std::vector<int> host_of_;  // host index of every communicator rank
  int nnodes_ = 1, ppn_ = 1;
  int rank_ = 0;
  uint64_t id_ = 0;
  std::string name_;
  uint64_t seq_ = 0;
  std::vector<uint64_t> p2p_sent_, p2p_recvd_;  // per-peer message numbers
  std::vector<Endpoint*> eps_;
  std::deque<std::shared_ptr<Op>> queue_;
  std::vector<std::shared_ptr<Op>> graveyard_;  // failed ops whose requests may be in flight
  StickyError err_;
  // Tuning read from the config registry, re-read when config::generation() changes.
  uint64_t tuning_gen_ = 0;
  int64_t timeout_ms_ = 0;
  std::unordered_map<uint64_t, Choice> choices_;  // (bytes, collective) -> selector's choice
  std::shared_ptr<ScratchPool> scratch_ = std::make_shared<ScratchPool>();
  enum class LaneState { kUntried, kSettingUp, kReady, kUnavailable };
  LaneState lane_state_ = LaneState::kUntried;
  std::unique_ptr<SharedLane> lane_;
  uint64_t lane_seq_ = 0;
  uint32_t lane_polls_ = 0;
  // Process watches of the members on this host (opened on the first stall).
  std::vector<std::unique_ptr<ProcessWatch>> watches_;
};

}  // namespace zcx::coll
