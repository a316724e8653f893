// The communicator: an ordered group of context ranks that run collectives together.
// Operations are queued and run one at a time in issue order (their messages to a peer must
// not interleave with the next operation's); request-based calls return at once and are
// driven by test/wait. Connections are made on first use (PeerLinks::endpoint). The first
// failure is sticky: later operations fail with it (zcx_comm_get_async_error).
// One thread at a time per communicator.
#pragma once

#include "algorithms/algorithms.h"
#include "base/context.h"
#include "common/clock.h"
#include "common/proc_watch.h"
#include "core/comm_stats.h"
#include "core/context_claim.h"
#include "core/desc.h"
#include "core/shared_lane.h"
#include "schedule/executor.h"
#include "schedule/schedule.h"
#include "select/select.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace zcx::coll {

class GpuRunner;

// A shared-lane operation (no schedule): the call, its lane sequence number, its progress.
struct LaneOp {
  OpArgs args;
  OpDesc desc;
  uint64_t desc_hash = 0;  // what peers' slots must carry (desc_hash(desc))
  uint64_t seq = 0;
  bool published = false;
  int next = 0;  // first member whose contribution has not been seen
  uint32_t idle = 0;
  uint32_t polls = 0;  // lane_progress calls: every 64th notes that this rank polls
  uint64_t moves = 0;    // waits that ended (a member was found ready): restarts the spinning
  int64_t moved_ns = 0;  // 0 until the first stall
  int64_t member_check_ns = 0;
  // The bulk lane (core/lane_bulk.cc): an operation larger than a slot, round by round.
  bool bulk = false;
  bool joined = false;    // every member has published this operation (descriptors agree)
  int phase = 0;          // within the round: BulkPhase
  size_t round = 0, rounds = 0;
  uint64_t step0 = 0;     // bulk steps before this operation (round k: step0 + 2k + 1, + 2)
  // When it last moved: the first stall's time, or now while it has not stalled.
  int64_t last_moved_ns() const { return moved_ns ? moved_ns : now_ns(); }
};

struct Op {
  Op(zcx_dtype_t dtype, zcx_redop_t redop) : sched(dtype, redop) {}
  OpDesc desc;
  Schedule sched;
  std::unique_ptr<Executor> exec;
  void* avg_buf = nullptr;  // avg: divide this many elements by nranks once done
  size_t avg_count = 0;
  bool lane = false;  // runs in the shared lane (lane_op), not through sched
  LaneOp lane_op;
  bool done = false;
  Status result = Status::kSuccess;
  CommStats::Posted posted;  // ZCX_STATS: when, for its time in flight and overlap
};

// Rounds of a bulk-lane operation with pieces of `piece_bytes` (core/lane_bulk.cc).
size_t bulk_rounds(const OpArgs& a, size_t piece_bytes);

// avg: which buffer, and how many elements of it, are divided by nranks once `a` completes on
// `rank` (false: none there — another collective, or a reduce's non-root).
bool avg_target(const OpArgs& a, int rank, void** buf, size_t* count);

// How a blocking wait paces its polls. There is no progress thread: the waiting loop is what
// moves the data (shm chunks, tcp socket buffers), so sleeping between polls stalls every
// pipeline — a 20 us nap per round cut 32 MiB allreduce to 0.5 GB/s. The first spin_rounds
// rounds only poll (a sched_yield costs as much as a small allreduce's whole transfer);
// later rounds yield, so oversubscribed ranks share the cores; once nothing has moved for
// kNapAfterIdleNs (a late or dead peer; ZCX_TIMEOUT still bounds the wait) it naps.
class WaitPacer {
 public:
  // A queued operation's poll drives the transport (about 0.1-1 us): 64 rounds. A shared-lane
  // poll reads one cached line (a few ns): kLaneSpinRounds cover a few microseconds. When
  // this host runs more members than CPUs among them, the peer being waited for is likely
  // descheduled behind us: kOversubscribedSpinRounds yields almost at once (as Open MPI's
  // yield_when_idle does when it detects oversubscription).
  static constexpr uint32_t kSpinRounds = 64;
  static constexpr uint32_t kLaneSpinRounds = 1024;
  static constexpr uint32_t kOversubscribedSpinRounds = 2;
  explicit WaitPacer(uint32_t spin_rounds = kSpinRounds) : spin_rounds_(spin_rounds) {}
  // After each poll that did not finish; `last_moved()` says when the operation last moved.
  template <class F>
  void pause(F&& last_moved) {
    if (++round_ < spin_rounds_) return;
    if (round_ % 64 == 0) napping_ = now_ns() - last_moved() > kNapAfterIdleNs;
    if (napping_) std::this_thread::sleep_for(std::chrono::microseconds(50));
    else std::this_thread::yield();
  }
  // The operation moved: its next wait spins again before it yields. (A bulk-lane operation
  // waits twice per round; without this, every wait after its first 1024 polls in all
  // yielded at once.)
  void moved() {
    round_ = 0;
    napping_ = false;
  }

 private:
  static constexpr int64_t kNapAfterIdleNs = 5'000'000;
  uint32_t spin_rounds_;
  uint32_t round_ = 0;
  bool napping_ = false;
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

  // Runs one operation to completion (a blocking call). On an idle communicator a
  // shared-lane operation runs right here, never queued: a few hundred nanoseconds count.
  Status run(const OpArgs& args);
  // Plans (selects the algorithm, builds the schedule) and queues one operation.
  Status post(const OpArgs& args, std::shared_ptr<Op>* op);
  // post in two steps: plan now (scratch is taken here), queue later (possibly on another
  // thread, while this one no longer touches the communicator: GpuRunner's asynchronous
  // calls plan on the caller's thread and run on the runner's).
  Status prepare(const OpArgs& args, std::shared_ptr<Op>* op);
  void enqueue(std::shared_ptr<Op> op);
  // Queues point-to-point calls as one operation (a group); prepare_group is its first
  // step, as prepare is post's.
  Status post_group(const std::vector<OpArgs>& calls, std::shared_ptr<Op>* op);
  Status prepare_group(const std::vector<OpArgs>& calls, std::shared_ptr<Op>* op);
  Status test(Op& op, bool* done);
  Status wait(Op& op);  // bounded: every executor times out after ZCX_TIMEOUT idle
  // A new communicator, with a context of its own (comm_split.cc).
  Status split(int color, int key, std::unique_ptr<Comm>* out);
  // Waits for every queued operation (bounded: each fails after ZCX_TIMEOUT without progress).
  Status drain();
  void abort();
  // From any thread, while the owner may be inside a call: that call, and every later one,
  // fails with kAborted at its next poll (abort() does the rest once no call is inside).
  void request_abort();
  Status async_error() const { return err_.has() ? err_.status() : Status::kSuccess; }
  // Stream-ordered calls (core/gpu_runner.h): what their device schedules use, attached by
  // the API at the first such call (zcx_comm owns it, and destroys it after the Comm).
  void attach_gpu(GpuRunner* gpu) { gpu_ = gpu; }

  // PeerLinks
  Status endpoint(int peer, Endpoint** ep) override;
  Context& context() override { return *ctx_; }
  std::string peer_name(int peer) const override;
  std::vector<int> dead_members() override;
  bool member_exited(int r);
  std::string departed_note() override;
  std::string stall_note(uint64_t seq, int64_t stalled_since_ns) override;
  Status data_endpoint(int peer, Endpoint** ep, bool* staged) override;
  const DeviceIo* device_io() override;

 private:
  Comm() = default;
  Status plan(const OpArgs& args, Op* op);
  bool staged_to(int peer) const;
  std::string link_name(int peer, bool device) const;
  SelectInput select_input(const OpArgs& a) const;
  void fill_desc(const OpArgs& a, Algo algo, OpDesc* out);
  const Choice& choose(const SelectInput& in);
  void forget_choices();
  void refresh_tuning();
  Status progress();
  Status fail_queue(Status st);  // records st as the sticky error; returns it
  Status gather(const void* mine, void* all, size_t bytes);  // allgather of bytes per rank
  Status fail_aborted();         // fail_queue(kAborted) with "was aborted" as the message
  void index_hosts();
  bool host_oversubscribed() const;
  Status check_usable();
  Status self_copies(const std::vector<OpArgs>& calls, Schedule* out) const;
  Status plan_group(const std::vector<OpArgs>& calls, Op* op);
  // A borrowed context (zcx_comm_init_context) is claimed while operations are in flight.
  Status claim_context() { return claim_ ? claim_->acquire() : Status::kSuccess; }
  void release_context_if_idle() {
    if (claim_ && queue_.empty()) claim_->release();
  }
  int64_t last_activity_ns() const;  // when the running operation last moved
  Status finish_avg(const Op& op);
  uint32_t spin_rounds(bool lane) const;
  // The shared lane (comm_lane.cc).
  bool lane_possible() const;
  Status lane_setup();
  void lane_start(const OpArgs& a, const SelectInput& si, LaneOp* lo);
  Status run_lane(const OpArgs& a, const SelectInput& si);
  Status lane_progress(LaneOp& lo, bool* done);
  size_t lane_bulk_piece() const;
  Status bulk_progress(LaneOp& lo, bool* done);
  Status bulk_await(LaneOp& lo, uint64_t step, bool* all);
  void bulk_copy_in(const LaneOp& lo);
  void bulk_reduce(const LaneOp& lo);
  void bulk_copy_own(const LaneOp& lo);
  void bulk_gather(const LaneOp& lo);
  void bulk_copy_out(const LaneOp& lo);
  bool lane_context_turn();
  Status lane_stalled(LaneOp& lo, int peer);
  Status lane_mismatch(const LaneOp& lo, int peer, const OpDesc& theirs);
  std::string remote_stall_note(const std::vector<int>& members, uint64_t seq);

  Context* ctx_ = nullptr;
  std::unique_ptr<Context> owned_ctx_;
  Departures* page_ = nullptr;  // ctx_->departures(), kept: noted on every call (may be null)
  std::vector<int> world_;
  std::vector<int> host_of_;  // host index of every communicator rank
  int nnodes_ = 1, ppn_ = 1;
  bool oversubscribed_ = false;  // more members on this host than CPUs among them
  bool lane_oversubscribed_ = false;  // some member found it so (agreed at the lane's set-up)
  bool yield_at_once_ = false;   // ZCX_COLL_YIELD resolved (refresh_tuning)
  int rank_ = 0;
  uint64_t id_ = 0;
  std::string name_;
  uint64_t seq_ = 0;
  std::vector<uint64_t> p2p_sent_, p2p_recvd_;  // per-peer message numbers
  std::vector<Endpoint*> eps_;
  GpuRunner* gpu_ = nullptr;
  std::vector<Endpoint*> data_eps_;    // device memory: cuda_ipc, or eps_ (GPUDirect or staged)
  std::deque<std::shared_ptr<Op>> queue_;
  std::unique_ptr<ContextClaim> claim_;  // null when the context is this communicator's own
  CommStats stats_;                       // ZCX_STATS
  std::vector<std::shared_ptr<Op>> graveyard_;  // failed ops whose requests may be in flight
  StickyError err_;
  std::atomic<bool> abort_requested_{false};  // request_abort(): seen by progress()
  // Tuning read from the config registry, re-read when config::generation() changes.
  uint64_t tuning_gen_ = 0;
  int64_t timeout_ms_ = 0;
  std::unordered_map<uint64_t, Choice> choices_;  // (bytes, collective) -> selector's choice
  uint64_t last_key_ = 0;                         // the last choice made, for repeated calls
  const Choice* last_choice_ = nullptr;
  std::shared_ptr<ScratchPool> scratch_ = std::make_shared<ScratchPool>();
  enum class LaneState { kUntried, kSettingUp, kReady, kUnavailable };
  LaneState lane_state_ = LaneState::kUntried;
  std::unique_ptr<SharedLane> lane_;
  uint64_t lane_seq_ = 0;
  uint64_t bulk_step_ = 0;  // bulk steps taken by this communicator's lane operations
  uint32_t lane_polls_ = 0;  // lane_context_turn's counter
  // Process watches of the members on this host (opened on the first stall or failed link).
  std::vector<std::unique_ptr<ProcessWatch>> watches_;
};

}  // namespace zcx::coll
