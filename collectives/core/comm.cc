// Communicator: planning, the operation queue, lazy endpoints, sticky errors (split: comm_split.cc).
#include "core/comm.h"

#include "core/gpu_runner.h"

#include "common/check.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/config_vars.h"
#include "common/log.h"
#include "reduce/reduce.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace zcx::coll {
namespace {

const config::StringParam kYieldParam(
    "ZCX_COLL_YIELD", "auto",
    "how a blocking collective waits: auto (yield the CPU at once when this host runs more "
    "members of the communicator than CPUs among them, else spin a while first), "
    "on (always yield at once), off (always spin first)");

// Whether waits yield at once, from ZCX_COLL_YIELD and the oversubscription found at create.
bool yield_at_once(bool oversubscribed) {
  const std::string v = kYieldParam.get();
  if (v == "on") return true;
  if (v == "off") return false;
  if (v != "auto")
    ZCX_WARN(kLogColl, "ZCX_COLL_YIELD=%s is not auto, on or off: using auto", v.c_str());
  return oversubscribed;
}

uint64_t counts_hash(const OpArgs& a) {
  if (a.kind == CollKind::kAllgatherv)
    return hash_counts(a.displs, a.nranks, hash_counts(a.counts, a.nranks, 1));
  if (a.kind == CollKind::kReducescatterv) return hash_counts(a.counts, a.nranks, 2);
  return 0;
}

}  // namespace

Status Comm::create(Context* ctx, std::unique_ptr<Context> owned, std::vector<int> world,
                    int rank, uint64_t id, std::string name, std::unique_ptr<Comm>* out) {
  ZCX_CHECK_ARG(ctx != nullptr && out != nullptr, kLogColl, "Comm::create: null argument");
  ZCX_CHECK_ARG(!world.empty() && rank >= 0 && rank < static_cast<int>(world.size()), kLogColl,
                "Comm::create: rank %d outside a communicator of %zu ranks", rank, world.size());
  std::unique_ptr<Comm> c(new Comm());
  c->ctx_ = ctx;
  c->page_ = ctx->departures();
  c->owned_ctx_ = std::move(owned);
  c->world_ = std::move(world);
  c->rank_ = rank;
  c->id_ = id;
  c->name_ = std::move(name);
  c->eps_.assign(c->world_.size(), nullptr);
  c->data_eps_.assign(c->world_.size(), nullptr);
  c->index_hosts();
  if (!c->owned_ctx_) c->claim_ = std::make_unique<ContextClaim>(ctx, "communicator '" + c->name_ + "'");
  c->stats_ = CommStats(c->nranks());
  c->p2p_sent_.assign(c->world_.size(), 0);
  c->p2p_recvd_.assign(c->world_.size(), 0);
  *out = std::move(c);
  return Status::kSuccess;
}

Comm::~Comm() {
  if (stats_.enabled()) {
    const std::string text = stats_.report(
        name_, rank_, [this](int peer, bool device) { return link_name(peer, device); });
    fputs(text.c_str(), stderr);
  }
  size_t stuck = 0;
  for (auto& op : graveyard_) stuck += op->exec && op->exec->has_inflight();
  if (stuck && !owned_ctx_)
    ZCX_WARN(kLogColl, "communicator '%s' destroyed with %zu failed operations still owning "
             "transfers; abort its context before freeing their buffers", name_.c_str(), stuck);
  for (auto& op : queue_)
    if (op->exec) op->exec->release_ranges();  // while the context is still there
  owned_ctx_.reset();  // closes every connection before the operations' buffers go
}

size_t Comm::connections() const {
  return static_cast<size_t>(std::count_if(eps_.begin(), eps_.end(), [](Endpoint* e) { return e; }));
}

Status Comm::endpoint(int peer, Endpoint** ep) {
  if (!eps_[peer]) ZCX_TRY(ctx_->endpoint(world_[peer], &eps_[peer]));
  *ep = eps_[peer];
  return Status::kSuccess;
}

// Both sides pick the same endpoint (reaches() reads what both ranks opened): cuda_ipc where
// it reaches the peer and staging is not forced, else the host endpoint. Over the host
// endpoint each side alone decides whether its device memory goes straight to the provider
// (GPUDirect RDMA) or through pinned bounce buffers: the bytes on the wire are the same.
Status Comm::data_endpoint(int peer, Endpoint** ep, bool* staged) {
  const bool forced = gpu_ && gpu_->staging();
  if (!data_eps_[peer]) {
    const bool ipc = gpu_ && !forced && ctx_->reaches(world_[peer], "cuda_ipc");
    if (ipc) ZCX_TRY(ctx_->endpoint(world_[peer], &data_eps_[peer], "cuda_ipc"));
    else ZCX_TRY(endpoint(peer, &data_eps_[peer]));
    Endpoint* e = data_eps_[peer];
    ZCX_INFO(kLogColl, "comm '%s': device memory to %s goes %s%s", name_.c_str(),
             peer_name(peer).c_str(), ipc ? "over cuda_ipc"
             : !forced && e->moves_device_memory() ? "by GPUDirect RDMA over "
                                                   : "staged through pinned host memory over ",
             ipc ? "" : e->provider()->name);
  }
  *ep = data_eps_[peer];
  *staged = staged_to(peer);
  return Status::kSuccess;
}

// Device memory to `peer` goes through pinned host memory over the host endpoint (not
// cuda_ipc, and GPUDirect is either absent or ZCX_GPU_STAGING forbids it).
bool Comm::staged_to(int peer) const {
  Endpoint* ep = data_eps_[peer];
  return ep != nullptr && ep == eps_[peer] &&
         ((gpu_ && gpu_->staging()) || !ep->moves_device_memory());
}

// How ZCX_STATS names the way to `peer`: the host endpoint's provider; for device memory,
// cuda_ipc, or the host provider with ":gdr" (GPUDirect RDMA) or ":staged".
std::string Comm::link_name(int peer, bool device) const {
  Endpoint* ep = device ? data_eps_[peer] : eps_[peer];
  if (ep == nullptr) return "";
  std::string name = ep->provider()->name;
  if (!device || ep != eps_[peer]) return name;
  return name + (staged_to(peer) ? ":staged" : ":gdr");
}

const DeviceIo* Comm::device_io() { return gpu_ ? gpu_->io() : nullptr; }

void Comm::index_hosts() {
  std::vector<std::string> hosts;
  std::vector<int> per_host;
  for (int w : world_) {
    const std::string& h = ctx_->bootstrap().host(w);
    size_t i = std::find(hosts.begin(), hosts.end(), h) - hosts.begin();
    if (i == hosts.size()) hosts.push_back(h), per_host.push_back(0);
    host_of_.push_back(static_cast<int>(i));
    ppn_ = std::max(ppn_, ++per_host[i]);
  }
  nnodes_ = static_cast<int>(hosts.size());
  oversubscribed_ = host_oversubscribed();
}

// More members on this host than CPUs they may run on together: the union of their CPU
// affinities (bootstrap pids; a launcher such as zcx-run or mpirun binds each rank to one
// CPU, so our own mask alone says nothing). A member whose mask cannot be read (another pid
// namespace) makes it count the host's online CPUs instead.
bool Comm::host_oversubscribed() const {
  cpu_set_t all;
  CPU_ZERO(&all);
  int members = 0;
  bool unknown = false;
  for (int r = 0; r < nranks(); ++r) {
    if (host_of_[r] != host_of_[rank_]) continue;
    ++members;
    const int pid = r == rank_ ? 0 : ctx_->bootstrap().pid(world_[r]);  // 0: ourselves
    cpu_set_t one;
    CPU_ZERO(&one);
    if ((r != rank_ && pid <= 0) || sched_getaffinity(pid, sizeof one, &one) != 0) unknown = true;
    else CPU_OR(&all, &all, &one);
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int cpus = unknown ? static_cast<int>(online > 0 ? online : 1) : CPU_COUNT(&all);
  ZCX_INFO(kLogTuning, "comm '%s': %d members on this host, %d CPUs among them%s", name_.c_str(),
           members, cpus,
           members > cpus ? ": oversubscribed (ZCX_COLL_YIELD=auto yields at once)" : "");
  return members > cpus;
}

uint32_t Comm::spin_rounds(bool lane) const {
  if (yield_at_once_) return WaitPacer::kOversubscribedSpinRounds;
  return lane ? WaitPacer::kLaneSpinRounds : WaitPacer::kSpinRounds;
}

std::string Comm::peer_name(int peer) const {
  char buf[160];
  snprintf(buf, sizeof buf, "rank %d of '%s' (context rank %d, host %s)", peer, name_.c_str(),
           world_[peer], ctx_->bootstrap().host(world_[peer]).c_str());
  return buf;
}

Status Comm::check_usable() {
  if (err_.has()) return err_.raise();
  return Status::kSuccess;
}

SelectInput Comm::select_input(const OpArgs& a) const {
  SelectInput si;
  si.kind = a.kind;
  si.bytes = select_bytes(a);
  si.nranks = a.nranks;
  si.link = nnodes_ > 1 ? LinkClass::kNet : LinkClass::kShm;
  si.nnodes = nnodes_;
  si.ppn = ppn_;
  si.shared_lane = a.device < 0 && lane_possible();  // the lane holds host memory only
  si.shared_bulk_piece = si.shared_lane ? lane_bulk_piece() : 0;
  // The members' agreed reading once the lane is set up; unknown before (plan() sets the
  // lane up if the choice was the lane, then chooses again).
  using O = Oversubscribed;
  si.oversubscribed = lane_ ? (lane_oversubscribed_ ? O::kYes : O::kNo)
                            : (lane_state_ == LaneState::kUntried ? O::kUnknown : O::kNo);
  return si;
}

Status Comm::plan(const OpArgs& in, Op* op) {
  OpArgs a = in;
  a.rank = rank_;
  a.nranks = nranks();
  Choice c;
  SelectInput si;
  if (a.kind != CollKind::kSendRecv) {
    si = select_input(a);
    c = choose(si);
    if (c.algo == Algo::kShared && lane_state_ == LaneState::kUntried) {
      ZCX_TRY(lane_setup());
      si = select_input(a);  // the lane's state, and with it what it can take, changed
      c = choose(si);
    }
  }
  a.chunk = c.chunk;
  a.host_of = host_of_.data();
  if (c.algo == Algo::kShared) {
    op->lane = true;
    lane_start(a, si, &op->lane_op);
    op->desc = op->lane_op.desc;
    return Status::kSuccess;
  }
  auto pool = a.device >= 0 && gpu_ ? gpu_->device_scratch() : scratch_;
  ZCX_TRY(build_schedule(a, c.algo, pool, &op->sched, &c.algo));
  stats_.count_op(a.kind, c.algo, select_bytes(a));
  stats_.count_schedule(op->sched);
  fill_desc(a, c.algo, &op->desc);
  return Status::kSuccess;
}

void Comm::fill_desc(const OpArgs& a, Algo algo, OpDesc* out) {
  OpDesc& d = *out;
  d.kind = static_cast<uint8_t>(a.kind);
  d.dtype = static_cast<uint8_t>(a.dtype);
  d.redop = static_cast<uint8_t>(a.op);
  d.algo = static_cast<uint8_t>(algo);
  d.root = a.kind == CollKind::kSendRecv ? -1 : a.root;
  d.nranks = static_cast<uint32_t>(a.nranks);
  d.comm_id = id_;
  d.seq = a.kind == CollKind::kSendRecv ? 0 : ++seq_;
  if (d.seq != 0 && page_) page_->note_call(id_, d.seq);  // for a peer's stall_note
  // The V forms agree on the arrays, not on this rank's own count.
  bool v = a.kind == CollKind::kAllgatherv || a.kind == CollKind::kReducescatterv;
  d.count = v ? sum_counts(a.counts, a.nranks) : (a.kind == CollKind::kAlltoallv ? 0 : a.count);
  d.aux = counts_hash(a);
  d.chunk = a.chunk;
}

void Comm::refresh_tuning() {
  const uint64_t gen = config::generation();
  if (gen == tuning_gen_) return;
  tuning_gen_ = gen;
  timeout_ms_ = params::timeout_ms();
  yield_at_once_ = yield_at_once(oversubscribed_);
  forget_choices();
}

// Choices are cached per (collective, bytes, lane offered): the cost model reads a dozen
// config values and formats its explanation, microseconds that an 8-byte allreduce cannot
// afford. A config override drops the cache (post() refreshes it); with TUNING logging on, a
// cached choice is printed again.
const Choice& Comm::choose(const SelectInput& in) {
  static_assert(static_cast<int>(CollKind::kCount) <= 16, "the kind takes 4 bits of the key");
  const uint64_t key = (static_cast<uint64_t>(in.bytes) << 5) |
                       (static_cast<uint64_t>(in.shared_lane) << 4) |
                       static_cast<uint64_t>(in.kind);
  if (last_choice_ != nullptr && key == last_key_ && !log_enabled(LogLevel::kInfo, kLogTuning))
    return *last_choice_;  // the loop of one size: skip even the hash lookup
  auto it = choices_.find(key);
  if (it != choices_.end()) {
    ZCX_INFO(kLogTuning, "%s (cached)", it->second.why.c_str());
  } else {
    if (choices_.size() >= 4096) forget_choices();  // bounded: sizes may vary without end
    it = choices_.emplace(key, select(in)).first;
  }
  last_key_ = key;
  last_choice_ = &it->second;  // stays valid until forget_choices (node-based map)
  return it->second;
}

void Comm::forget_choices() {
  choices_.clear();
  last_choice_ = nullptr;
}

bool avg_target(const OpArgs& a, int rank, void** buf, size_t* count) {
  if (a.op != ZCX_AVG || a.kind == CollKind::kSendRecv) return false;
  if (a.kind == CollKind::kReduce && rank != a.root) return false;
  *buf = a.recvbuf;
  *count = a.kind == CollKind::kReducescatterv ? a.counts[rank] : a.count;
  return true;
}

Status Comm::prepare(const OpArgs& args, std::shared_ptr<Op>* out) {
  ZCX_TRY(check_usable());
  ZCX_TRY(claim_context());  // before plan numbers the operation
  refresh_tuning();
  auto op = std::make_shared<Op>(args.dtype, args.op);
  if (Status st = plan(args, op.get()); st != Status::kSuccess) {
    release_context_if_idle();
    return st;
  }
  (void)avg_target(args, rank_, &op->avg_buf, &op->avg_count);
  *out = std::move(op);
  return Status::kSuccess;
}

void Comm::enqueue(std::shared_ptr<Op> op) {
  if (Status st = claim_context(); st != Status::kSuccess) {  // held since prepare, but
    op->result = st;  // a progress() on another thread may have let go: not sticky
    op->done = true;
    return;
  }
  if (op->sched.device() < 0) op->posted = stats_.posted();
  queue_.push_back(std::move(op));
  (void)progress();  // start at once; failures are reported by test/wait
}

Status Comm::post(const OpArgs& args, std::shared_ptr<Op>* out) {
  CommStats::Inside inside(stats_);
  ZCX_TRY(prepare(args, out));
  enqueue(*out);
  return Status::kSuccess;
}

// The first failure becomes the communicator's sticky error (with this thread's message);
// every queued operation fails with it.
Status Comm::fail_queue(Status st) {
  err_.record(st, last_error());
  ctx_->mark_unclean();
  for (auto& op : queue_) {
    op->result = st;
    op->done = true;
    if (op->exec) op->exec->release_ranges();
    if (op->exec && op->exec->has_inflight()) graveyard_.push_back(op);
  }
  queue_.clear();
  release_context_if_idle();
  return st;
}

Status Comm::progress() {
  if (err_.has()) return err_.status();
  if (abort_requested_.load(std::memory_order_relaxed)) return fail_aborted();
  // A shared-lane operation needs no transport: the context only gets its turns.
  const bool lane_head = !queue_.empty() && queue_.front()->lane;
  Status cst = !lane_head || lane_context_turn() ? ctx_->progress() : Status::kSuccess;
  if (cst != Status::kSuccess) return fail_queue(cst);
  while (!queue_.empty()) {
    Op& head = *queue_.front();
    if (!head.exec && !head.lane) {
      head.exec = std::make_unique<Executor>(&head.sched, this, head.desc, nranks(), timeout_ms_);
      if (lane_ && head.desc.seq != 0) lane_->announce(rank_, head.desc);
    }
    bool done = false;
    Status st = head.lane ? lane_progress(head.lane_op, &done) : head.exec->progress(&done);
    if (st == Status::kSuccess && done) st = finish_avg(head);
    if (st != Status::kSuccess) return fail_queue(st);
    if (!done) return Status::kSuccess;
    head.done = true;
    if (head.desc.seq != 0 && page_) page_->note_done(head.desc.seq);
    stats_.finished(static_cast<CollKind>(head.desc.kind), static_cast<Algo>(head.desc.algo),
                    head.posted);
    queue_.pop_front();
  }
  release_context_if_idle();
  return Status::kSuccess;
}

Status Comm::finish_avg(const Op& op) {
  if (!op.avg_buf) return Status::kSuccess;
  if (op.sched.device() < 0) {
    finalize_avg(op.sched.dtype(), op.avg_buf, op.avg_count, nranks());
    return Status::kSuccess;
  }
  if (!gpu_) return set_error(Status::kInternal, kLogColl, "device avg without a GPU runner");
  return gpu_->finalize_avg(op.sched.dtype(), op.avg_buf, op.avg_count, nranks());
}

Status Comm::test(Op& op, bool* done) {
  CommStats::Inside inside(stats_);
  if (!op.done) (void)progress();
  *done = op.done;
  if (op.done && op.result != Status::kSuccess) return err_.has() ? err_.raise() : op.result;
  return Status::kSuccess;
}

// Busy-polls, paced by WaitPacer (comm.h).
Status Comm::wait(Op& op) {
  CommStats::Inside inside(stats_);
  WaitPacer pacer(spin_rounds(false));
  for (;;) {
    bool done = false;
    ZCX_TRY(test(op, &done));
    if (done) return Status::kSuccess;
    pacer.pause([this] { return last_activity_ns(); });
  }
}

int64_t Comm::last_activity_ns() const {
  if (queue_.empty()) return now_ns();
  const Op& head = *queue_.front();
  if (head.lane) return head.lane_op.last_moved_ns();
  return head.exec ? head.exec->last_progress_ns() : now_ns();
}

Status Comm::drain() {
  while (!queue_.empty()) {
    std::shared_ptr<Op> last = queue_.back();
    ZCX_TRY(wait(*last));
  }
  return Status::kSuccess;
}

void Comm::request_abort() {
  abort_requested_.store(true, std::memory_order_relaxed);
  if (owned_ctx_) owned_ctx_->abort();  // thread-safe; ends waits inside the transport too
}

// The sticky error says "aborted" (unless an earlier failure is already sticky), not
// whatever this thread's last error happens to be.
Status Comm::fail_aborted() {
  err_.record(Status::kAborted, "communicator '" + name_ + "' was aborted");  // first one stays
  return fail_queue(Status::kAborted);
}

void Comm::abort() {
  (void)fail_aborted();
  if (owned_ctx_) owned_ctx_->abort();
}

}  // namespace zcx::coll
