// make_plan: the communicator's select_input and plan (collectives/core/comm.cc) for every
// rank in turn, counting the schedules' tasks instead of running them.
#include "plan.h"

#include "algorithms/algorithms.h"
#include "common/config.h"

#include <sys/mman.h>

#include <algorithm>
#include <memory>
#include <set>

namespace zcx::plan {
namespace {

using coll::Algo;
using coll::CollKind;
using coll::LinkClass;

// Address space for a buffer: the builders only compute addresses inside it.
class Reserved {
 public:
  explicit Reserved(size_t bytes) : bytes_(std::max<size_t>(bytes, 4096)) {
    p_ = mmap(nullptr, bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  ~Reserved() {
    if (p_ != MAP_FAILED) munmap(p_, bytes_);
  }
  Reserved(const Reserved&) = delete;
  Reserved& operator=(const Reserved&) = delete;
  void* get() const { return p_ == MAP_FAILED ? nullptr : p_; }

 private:
  size_t bytes_;
  void* p_;
};

template <class P>
const P* param(const char* name, config::ParamType type) {
  const config::ParamBase* p = config::find(name);
  return p && p->type() == type ? static_cast<const P*>(p) : nullptr;
}

// The lane's settings as the communicator reads them (core/comm_lane.cc).
size_t lane_bulk_budget() {
  const auto* p = param<config::SizeParam>("ZCX_COLL_SHARED_BULK", config::ParamType::kSize);
  return p ? p->get() : 0;
}
bool lane_enabled() {
  const auto* p = param<config::BoolParam>("ZCX_COLL_SHARED_LANE", config::ParamType::kBool);
  return p && p->get();
}

// Whether the call's count is a per-rank block of the size (nccl-tests' convention).
bool blocks(CollKind k) {
  return k == CollKind::kAllgather || k == CollKind::kReducescatter || k == CollKind::kAlltoall;
}

// As Comm::select_input: the size the model sees, the hosts spanned, the lane.
coll::SelectInput select_input(const PlanInput& in, size_t count, size_t esize) {
  const int n = static_cast<int>(in.host_of.size());
  std::vector<int> per_host(static_cast<size_t>(*std::max_element(in.host_of.begin(), in.host_of.end())) + 1);
  for (int h : in.host_of) ++per_host[static_cast<size_t>(h)];
  coll::SelectInput si;
  si.kind = in.kind;
  si.nranks = n;
  si.bytes = count * esize * (blocks(in.kind) ? static_cast<size_t>(n) : 1);
  si.nnodes = static_cast<int>(per_host.size() - std::count(per_host.begin(), per_host.end(), 0));
  si.ppn = *std::max_element(per_host.begin(), per_host.end());
  si.link = si.nnodes > 1 ? LinkClass::kNet : LinkClass::kShm;
  si.shared_lane = in.lane && lane_enabled() && si.nnodes == 1 && n >= 2 && n <= coll::kSharedMaxRanks;
  si.shared_bulk_piece = si.shared_lane ? coll::shared_bulk_piece(n, lane_bulk_budget()) : 0;
  return si;
}

// What passes between each ordered pair of ranks: sends add, the peer's receives subtract,
// so a pair that agrees ends at zero (bytes and messages).
class PairBalance {
 public:
  explicit PairBalance(int n) : n_(static_cast<size_t>(n)), bytes_(n_ * n_), msgs_(n_ * n_) {}
  void add(int from, int to, int64_t bytes, int64_t msgs) {
    const size_t at = static_cast<size_t>(from) * n_ + static_cast<size_t>(to);
    bytes_[at] += bytes;
    msgs_[at] += msgs;
  }
  std::vector<std::string> disagreements() const {
    std::vector<std::string> out;
    for (size_t at = 0; at < bytes_.size(); ++at)
      if (bytes_[at] != 0 || msgs_[at] != 0)
        out.push_back("rank " + std::to_string(at / n_) + " -> rank " + std::to_string(at % n_) +
                      ": sends and receives disagree (" + std::to_string(bytes_[at]) +
                      " bytes, " + std::to_string(msgs_[at]) + " messages more sent than received)");
    return out;
  }

 private:
  size_t n_;
  std::vector<int64_t> bytes_, msgs_;
};

void count_tasks(const coll::Schedule& s, int rank, const std::vector<int>& host_of,
                 RankTraffic* t, PairBalance* balance) {
  for (const coll::Task& task : s.tasks()) {
    const bool message = task.kind == coll::TaskKind::kSend || task.kind == coll::TaskKind::kRecv;
    if (!message) {
      (task.kind == coll::TaskKind::kReduce ? t->reduced : t->copied) += task.bytes;
      continue;
    }
    const bool same_host = host_of[static_cast<size_t>(task.peer)] == host_of[static_cast<size_t>(rank)];
    const int link = static_cast<int>(same_host ? LinkClass::kShm : LinkClass::kNet);
    const auto bytes = static_cast<int64_t>(task.bytes);
    if (task.kind == coll::TaskKind::kSend) {
      t->out[link] += task.bytes;
      ++t->msgs_out;
      balance->add(rank, task.peer, bytes, 1);
    } else {
      t->in[link] += task.bytes;
      ++t->msgs_in;
      balance->add(task.peer, rank, -bytes, -1);
    }
  }
}

// Builds every rank's schedule for `p->choice` and counts it into p->ranks.
std::string count_schedules(const PlanInput& in, size_t esize, Plan* p) {
  const int n = static_cast<int>(in.host_of.size());
  const size_t span = p->count * esize * static_cast<size_t>(n);
  Reserved send(span), recv(span);
  if (!send.get() || !recv.get())
    return "cannot reserve " + std::to_string(span) + " bytes of address space for the buffers";
  PairBalance balance(n);
  auto pool = std::make_shared<coll::ScratchPool>();
  for (int r = 0; r < n; ++r) {
    coll::OpArgs a;
    a.kind = in.kind, a.dtype = in.dtype, a.op = in.op, a.count = p->count;
    a.root = in.kind == CollKind::kBroadcast || in.kind == CollKind::kReduce ? in.root : -1;
    a.sendbuf = send.get(), a.recvbuf = recv.get();
    a.rank = r, a.nranks = n, a.chunk = p->choice.chunk, a.host_of = in.host_of.data();
    coll::Schedule s(in.dtype, in.op);
    if (coll::build_schedule(a, p->choice.algo, pool, &s, &p->built) != Status::kSuccess)
      return "building rank " + std::to_string(r) + "'s schedule failed: " + last_error();
    count_tasks(s, r, in.host_of, &p->ranks[static_cast<size_t>(r)], &balance);
  }
  p->mismatches = balance.disagreements();
  return "";
}

std::string check_input(const PlanInput& in, size_t esize) {
  const int n = static_cast<int>(in.host_of.size());
  if (n < 1) return "at least one rank is needed";
  if (esize == 0) return "unknown dtype";
  for (int h : in.host_of)
    if (h < 0) return "host indices must not be negative";
  if ((in.kind == CollKind::kBroadcast || in.kind == CollKind::kReduce) && (in.root < 0 || in.root >= n))
    return "root " + std::to_string(in.root) + " is not a rank of " + std::to_string(n);
  return "";
}

}  // namespace

bool kind_from_name(std::string name, CollKind* out) {
  std::erase(name, '_');
  for (CollKind k : {CollKind::kAllreduce, CollKind::kBroadcast, CollKind::kReduce,
                     CollKind::kAllgather, CollKind::kReducescatter, CollKind::kAlltoall})
    if (name == coll::coll_kind_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

std::string make_plan(const PlanInput& in, Plan* out) {
  const size_t esize = zcx_dtype_size(in.dtype);
  if (std::string bad = check_input(in, esize); !bad.empty()) return bad;
  const int n = static_cast<int>(in.host_of.size());
  Plan p;
  p.count = in.bytes / esize / (blocks(in.kind) ? static_cast<size_t>(n) : 1);
  const coll::SelectInput si = select_input(in, p.count, esize);
  p.choice = coll::select(si);
  p.lane = p.choice.algo == Algo::kShared;
  p.ranks.assign(static_cast<size_t>(n), RankTraffic{});
  if (!p.lane)
    if (std::string e = count_schedules(in, esize, &p); !e.empty()) return e;
  *out = std::move(p);
  return "";
}

}  // namespace zcx::plan
