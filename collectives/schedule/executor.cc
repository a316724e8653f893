// The schedule executor.
#include "schedule/executor.h"

#include "common/clock.h"
#include "reduce/reduce.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace zcx::coll {

Executor::Executor(const Schedule* schedule, PeerLinks* links, const OpDesc& desc, int nranks,
                   int64_t timeout_ms)
    : sched_(schedule),
      links_(links),
      page_(links->context().departures()),
      desc_(desc),
      slots_(schedule->tasks().size()),
      complete_(schedule->tasks().size(), 0),
      hdrs_(schedule->tasks().size()),
      link_sent_(nranks, 0),
      link_recv_(nranks, 0),
      link_ok_(nranks, 0),
      last_progress_ns_(now_ns()),
      timeout_ms_(timeout_ms) {}

namespace {

bool registers_memory(const Endpoint* ep) {
  const zcx_provider_ops_t* p = ep->provider();  // null for the tests' fake endpoints
  return p != nullptr && (p->flags & ZCX_PROVIDER_NEEDS_REG) != 0;
}

// Bytes [p, p + n) of the allocation at `alloc` (0: host memory, one group).
struct Range {
  uintptr_t alloc;
  const char* p;
  size_t n;
  bool operator<(const Range& o) const { return alloc != o.alloc ? alloc < o.alloc : p < o.p; }
};

// Sorted, with overlapping or touching ranges of one allocation joined (a buffer's chunks
// become the buffer).
std::vector<Range> merge_ranges(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> out;
  for (const Range& r : ranges) {
    Range* last = out.empty() ? nullptr : &out.back();
    if (last && last->alloc == r.alloc && r.p <= last->p + last->n)
      last->n = static_cast<size_t>(std::max(last->p + last->n, r.p + r.n) - last->p);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace

// The task buffers, per CUDA allocation in a device operation. (Descriptors are not held:
// they are small enough to go through the context's own registered blocks.)
void Executor::hold_ranges() {
  holding_ = true;
  std::vector<Range> bufs;
  Allocation last;  // chunks of one buffer follow each other: one query per allocation
  for (const Task& t : sched_->tasks()) {
    if (t.bytes == 0 || (t.kind != TaskKind::kSend && t.kind != TaskKind::kRecv)) continue;
    const char* p = static_cast<const char*>(t.kind == TaskKind::kSend ? t.src : t.dst);
    const auto u = reinterpret_cast<uintptr_t>(p);
    if (on_device() && (u < last.base || u - last.base >= last.size)) last = allocation_of(p);
    bufs.push_back({on_device() ? last.base : 0, p, t.bytes});
  }
  for (const Range& r : merge_ranges(std::move(bufs))) held_.emplace_back(r.p, r.n);
  for (auto [p, n] : held_) links_->context().hold_range(p, n);
}

void Executor::release_ranges() {
  for (auto [p, n] : held_) links_->context().release_range(p, n);
  held_.clear();
}

bool Executor::deps_done(int i) const {
  const Task& t = sched_->tasks()[i];
  for (uint32_t d = t.dep_begin; d < t.dep_end; ++d)
    if (!complete_[sched_->deps()[d]]) return false;
  return true;
}

// A reduction or copy: no transport, complete when it returns.
Status Executor::issue_local(const Task& t) {
  if (on_device()) return device_compute(t);
  if (t.kind == TaskKind::kReduce) {
    size_t es = zcx_dtype_size(sched_->dtype());
    reduce(sched_->dtype(), sched_->op(), t.dst, t.src, t.src2, t.bytes / es);
  } else {
    std::memcpy(t.dst, t.src, t.bytes);
  }
  return Status::kSuccess;
}

Status Executor::issue(int i) {
  const Task& t = sched_->tasks()[i];
  if (t.kind == TaskKind::kReduce || t.kind == TaskKind::kCopy) {
    ZCX_TRY(issue_local(t));
    complete_[i] = 1;
    return Status::kSuccess;
  }
  Endpoint* ep = nullptr;
  Status st = links_->endpoint(t.peer, &ep);
  if (st != Status::kSuccess) return fail(st, t, "connecting");
  Endpoint* data_ep = ep;
  bool staged = false;
  if (on_device() && t.bytes != 0) {
    st = links_->data_endpoint(t.peer, &data_ep, &staged);
    if (st != Status::kSuccess) return fail(st, t, "connecting (device memory)");
  }
  if (!holding_ && (registers_memory(ep) || registers_memory(data_ep))) hold_ranges();
  ZCX_TRY(t.kind == TaskKind::kSend ? issue_send(i, ep, data_ep, staged)
                                    : issue_recv(i, ep, data_ep, staged));
  if (slots_[i].hdr_done && slots_[i].data_done) complete_[i] = 1;  // nothing to wait for
  else inflight_.push_back(i);
  return Status::kSuccess;
}

Status Executor::issue_send(int i, Endpoint* ep, Endpoint* data_ep, bool staged) {
  const Task& t = sched_->tasks()[i];
  Slot& s = slots_[i];
  const int tag = static_cast<int>(desc_.comm_id & 0x7fff);
  if (t.per_message_header || !link_sent_[t.peer]) {
    hdrs_[i] = desc_;
    if (t.per_message_header) hdrs_[i].count = t.bytes;
    if (t.msg_seq) hdrs_[i].seq = t.msg_seq;
    link_sent_[t.peer] = 1;
    Status st = ep->isend(&hdrs_[i], sizeof(OpDesc), tag, &s.hdr);
    if (st != Status::kSuccess) return fail(st, t, "sending the descriptor to");
    s.hdr_done = false;
  }
  if (t.bytes == 0) return Status::kSuccess;
  if (staged) ZCX_TRY(stage_out(t, s));
  Status st = !on_device() ? data_ep->isend(t.src, t.bytes, tag, &s.req)
              : staged     ? data_ep->isend(s.bounce->data(), t.bytes, tag, &s.req)
                           : data_ep->isend_device(t.src, t.bytes, tag, &s.req);
  if (st != Status::kSuccess) return fail(st, t, "sending to");
  s.data_done = false;
  return Status::kSuccess;
}

Status Executor::issue_recv(int i, Endpoint* ep, Endpoint* data_ep, bool staged) {
  const Task& t = sched_->tasks()[i];
  Slot& s = slots_[i];
  const int tag = static_cast<int>(desc_.comm_id & 0x7fff);
  if (t.per_message_header || !link_recv_[t.peer]) {
    link_recv_[t.peer] = 1;
    Status st = ep->irecv(&hdrs_[i], sizeof(OpDesc), tag, &s.hdr);
    if (st != Status::kSuccess) return fail(st, t, "receiving the descriptor from");
    s.hdr_done = false;
  }
  if (t.bytes == 0) return Status::kSuccess;
  if (staged) ZCX_TRY(stage_buffer(t, s));
  Status st = !on_device() ? data_ep->irecv(t.dst, t.bytes, tag, &s.req)
              : staged     ? data_ep->irecv(s.bounce->data(), t.bytes, tag, &s.req)
                           : data_ep->irecv_device(t.dst, t.bytes, tag, &s.req);
  // A NIC's writes into device memory may land after the receive completed: a provider
  // with iflush orders them itself (the context calls it), otherwise the GPU is flushed.
  // cuda_ipc's sender copies and then says DONE: nothing to flush.
  const zcx_provider_ops_t* ops = data_ep->provider();
  s.gpu_flush = on_device() && !staged && !(ops->flags & ZCX_PROVIDER_DEVICE_ONLY) &&
                ops->iflush == nullptr;
  if (st != Status::kSuccess) return fail_recv(st, t);
  s.data_done = false;
  return Status::kSuccess;
}

Status Executor::test_header(int i, const Task& t, Slot& s) {
  bool done = false;
  size_t size = 0;
  Status st = links_->context().test(s.hdr, &done, &size);
  if (st != Status::kSuccess) return fail(st, t, "exchanging the descriptor with");
  if (!done) return Status::kSuccess;
  s.hdr = nullptr;
  s.hdr_done = true;
  if (t.kind == TaskKind::kSend) return Status::kSuccess;
  return check_header(i, t, size);
}

// A receive refused at once (e.g. its message does not fit) may come from a peer that called
// another operation: when that peer's descriptor has arrived (in this task's slot or an
// earlier one's: it comes once per link), it says why.
Status Executor::fail_recv(Status st, const Task& t) {
  std::string cause = last_error();
  const auto& tasks = sched_->tasks();
  for (size_t j = 0; j < tasks.size(); ++j) {
    Slot& h = slots_[j];
    if (tasks[j].kind != TaskKind::kRecv || tasks[j].peer != t.peer || h.hdr == nullptr)
      continue;
    bool done = false;
    size_t size = 0;
    if (links_->context().test(h.hdr, &done, &size) == Status::kSuccess && done) {
      h.hdr = nullptr;
      h.hdr_done = true;
      ZCX_TRY(check_header(static_cast<int>(j), tasks[j], size));
    }
    break;
  }
  (void)set_error_quiet(st, "%s", cause.c_str());  // fail() quotes the receive's own error
  return fail(st, t, "receiving from");
}

Status Executor::check_header(int i, const Task& t, size_t size) {
  OpDesc want = desc_;
  if (t.per_message_header) want.count = t.bytes;
  if (t.msg_seq) want.seq = t.msg_seq;
  std::string diff = size == sizeof(OpDesc) ? desc_diff(want, hdrs_[i])
                                            : "descriptor of " + std::to_string(size) + " bytes";
  if (diff.empty()) {
    link_ok_[t.peer] = 1;
    return Status::kSuccess;
  }
  return set_error(Status::kMismatch, kLogColl,
                   "%s: %s called a different operation (%s): %s. %s", what().c_str(),
                   links_->peer_name(t.peer).c_str(), desc_describe(hdrs_[i]).c_str(),
                   diff.c_str(), desc_mismatch_advice(want, hdrs_[i]));
}

Status Executor::test(int i, bool* complete) {
  const Task& t = sched_->tasks()[i];
  Slot& s = slots_[i];
  *complete = false;
  if (!s.hdr_done) {
    ZCX_TRY(test_header(i, t, s));
    if (!s.hdr_done) return Status::kSuccess;  // data is judged only after its descriptor
  }
  // Data from a peer is judged only once that peer's descriptor matched: a disagreeing
  // peer's data may not fit, and the descriptor says why.
  if (!s.data_done && t.kind == TaskKind::kRecv && !t.per_message_header && !link_ok_[t.peer])
    return Status::kSuccess;
  if (!s.data_done) {
    bool done = false;
    size_t size = 0;
    Status st = links_->context().test(s.req, &done, &size);
    if (st != Status::kSuccess) return fail(st, t, t.kind == TaskKind::kSend ? "sending to" : "receiving from");
    if (!done) return Status::kSuccess;
    s.req = nullptr;
    s.data_done = true;
    if (t.kind == TaskKind::kRecv && size != t.bytes)
      return set_error(Status::kMismatch, kLogColl, "%s: %s sent %zu bytes where %zu were expected",
                       what().c_str(), links_->peer_name(t.peer).c_str(), size, t.bytes);
    if (s.bounce && t.kind == TaskKind::kRecv) ZCX_TRY(stage_in(t, s));
    if (s.gpu_flush) ZCX_TRY(flush_gdr_writes());
    s.bounce.reset();
  }
  *complete = true;
  complete_[i] = 1;
  return Status::kSuccess;
}

Status Executor::progress(bool* done) {
  const auto& tasks = sched_->tasks();
  bool moved = true;
  for (int round = 0; moved && round < 4; ++round) {
    moved = false;
    while (next_ < tasks.size() && deps_done(static_cast<int>(next_))) {
      ZCX_TRY(issue(static_cast<int>(next_)));
      ++next_;
      moved = true;
    }
    for (size_t k = 0; k < inflight_.size();) {
      bool complete = false;
      ZCX_TRY(test(inflight_[k], &complete));
      if (complete) {
        inflight_[k] = inflight_.back();
        inflight_.pop_back();
        moved = true;
      } else {
        ++k;
      }
    }
    if (moved) moved_since_clock_ = true;
  }
  *done = next_ == tasks.size() && inflight_.empty();
  if (*done) release_ranges();
  // The clock is read once per 32 calls that do not finish: on the small-message path it was
  // a visible share of each operation, and the timeout is seconds long. Calls that move data
  // count too, or a rank moving data nonstop would never note that it polls and its stalled
  // peers would call it silent (core/comm_members.cc).
  if (*done || (++calls_ & 31) != 0) return Status::kSuccess;
  const int64_t now = now_ns();
  if (page_) page_->note_poll(now);
  if (moved_since_clock_) last_progress_ns_ = now, moved_since_clock_ = false;
  if (now - last_progress_ns_ > timeout_ms_ * 1000000) return timeout_error();
  return check_members(now);
}

// A rank that dies is seen at once only by the ranks linked to it; the others stall behind
// their neighbours. After a second without progress (and then twice a second) the stalled
// rank asks which member has exited, so that every survivor names the dead rank well
// within ZCX_TIMEOUT — not a neighbour that merely stopped.
Status Executor::check_members(int64_t now) {
  constexpr int64_t kFirstCheckNs = 1'000'000'000, kRecheckNs = 500'000'000;
  if (now - last_progress_ns_ < kFirstCheckNs || now < next_member_check_ns_)
    return Status::kSuccess;
  next_member_check_ns_ = now + kRecheckNs;
  const std::vector<int> dead = links_->dead_members();
  if (dead.empty()) return Status::kSuccess;
  return set_error(Status::kRemote, kLogColl, "%s: %s died (its process exited); %s%s",
                   what().c_str(), links_->peer_names(dead).c_str(), waiting_for().c_str(),
                   links_->stall_note(desc_.seq, last_progress_ns_).c_str());
}

std::string Executor::what() const { return desc_describe(desc_); }

Status Executor::fail(Status st, const Task& t, const char* action) {
  std::string cause = last_error();
  const bool aborted = st == Status::kAborted;
  return set_error(st, kLogColl, "%s: %s %s failed: %s%s%s", what().c_str(), action,
                   links_->peer_name(t.peer).c_str(), cause.c_str(),
                   aborted ? "" : exited_note(t.peer).c_str(),
                   aborted ? "" : links_->stall_note(desc_.seq, last_progress_ns_).c_str());
}

// A link fails when its peer closed or died, and that peer may have closed because it failed
// on a member that died: the member this rank was never linked to is named too, so that
// every survivor on its host names the dead rank (not only the neighbour that gave up).
std::string Executor::exited_note(int peer) {
  std::string note;
  for (int dead : links_->dead_members())
    note += "; " + links_->peer_name(dead) +
            (dead == peer ? " has exited without finalizing" : " died (its process exited)");
  return note;
}

std::string Executor::waiting_for() const {
  std::set<int> peers;
  for (int i : inflight_) peers.insert(sched_->tasks()[i].peer);
  std::string list;
  for (int p : peers) list += (list.empty() ? "" : ", ") + links_->peer_name(p);
  if (list.empty()) return "(no transfer in flight: waiting on a local step)";
  return "waiting for " + list;
}

Status Executor::timeout_error() const {
  return set_error(Status::kTimeout, kLogColl,
                   "%s: no progress for %.1f s (ZCX_TIMEOUT); %s — has that rank reached this "
                   "operation, and is it alive?%s%s",
                   what().c_str(), timeout_ms_ / 1000.0, waiting_for().c_str(),
                   links_->departed_note().c_str(),
                   links_->stall_note(desc_.seq, last_progress_ns_).c_str());
}

}  // namespace zcx::coll
