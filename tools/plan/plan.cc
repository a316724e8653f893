// make_plan: the communicator's select_input and plan (collectives/core/comm.cc) for every
// rank in turn, counting the schedules' tasks instead of running them.
#include "plan.h"

#include "algorithms/algorithms.h"
#include "core/shared_lane.h"

#include <sys/mman.h>

#include <algorithm>
#include <memory>

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

// Whether the call's count is a per-rank block of the size (nccl-tests' convention).
bool blocks(CollKind k) {
  return k == CollKind::kAllgather || k == CollKind::kReducescatter || k == CollKind::kAlltoall;
}

// The call as every rank makes it (rank, chunk and buffers are set per schedule).
coll::OpArgs call_args(const PlanInput& in, size_t count) {
  coll::OpArgs a;
  a.kind = in.kind, a.dtype = in.dtype, a.op = in.op, a.count = count;
  a.root = in.kind == CollKind::kBroadcast || in.kind == CollKind::kReduce ? in.root : -1;
  a.nranks = static_cast<int>(in.host_of.size()), a.host_of = in.host_of.data();
  return a;
}

// As Comm::select_input: the size the model sees, the hosts spanned, the lane.
coll::SelectInput select_input(const PlanInput& in, const coll::OpArgs& a) {
  const int n = a.nranks;
  std::vector<int> per_host(static_cast<size_t>(*std::max_element(in.host_of.begin(), in.host_of.end())) + 1);
  for (int h : in.host_of) ++per_host[static_cast<size_t>(h)];
  coll::SelectInput si;
  si.kind = in.kind;
  si.nranks = n;
  si.bytes = coll::select_bytes(a);
  si.nnodes = static_cast<int>(per_host.size() - std::count(per_host.begin(), per_host.end(), 0));
  si.ppn = *std::max_element(per_host.begin(), per_host.end());
  si.link = si.nnodes > 1 ? LinkClass::kNet : LinkClass::kShm;
  si.shared_lane = in.lane && coll::shared_lane_configured() && si.nnodes == 1 && n >= 2 &&
                   n <= coll::kSharedMaxRanks;
  si.shared_bulk_piece =
      si.shared_lane ? coll::shared_bulk_piece(n, coll::shared_lane_bulk_budget()) : 0;
  si.oversubscribed = in.cpus > 0 && si.ppn > in.cpus ? coll::Oversubscribed::kYes
                                                      : coll::Oversubscribed::kNo;
  return si;
}

// One rank's traffic by link class: peers on its host over shm, the others over the net.
RankTraffic by_link(const coll::ScheduleTraffic& t, int rank, const std::vector<int>& host_of) {
  RankTraffic out;
  for (size_t peer = 0; peer < t.peers.size(); ++peer) {
    const coll::PeerTraffic& p = t.peers[peer];
    const bool same_host = host_of[peer] == host_of[static_cast<size_t>(rank)];
    const int link = static_cast<int>(same_host ? LinkClass::kShm : LinkClass::kNet);
    out.out[link] += p.sent;
    out.in[link] += p.received;
    out.msgs_out += p.sends;
    out.msgs_in += p.receives;
  }
  out.reduced = t.reduced;
  out.copied = t.copied;
  return out;
}

// Each ordered pair of ranks whose sends and the peer's receives differ.
std::vector<std::string> disagreements(const std::vector<coll::ScheduleTraffic>& all) {
  std::vector<std::string> out;
  for (size_t a = 0; a < all.size(); ++a)
    for (size_t b = 0; b < all.size(); ++b) {
      const coll::PeerTraffic &sent = all[a].peers[b], &got = all[b].peers[a];
      if (sent.sent == got.received && sent.sends == got.receives) continue;
      out.push_back("rank " + std::to_string(a) + " -> rank " + std::to_string(b) +
                    ": sends and receives disagree (" + std::to_string(sent.sent) + " bytes in " +
                    std::to_string(sent.sends) + " messages sent, " + std::to_string(got.received) +
                    " in " + std::to_string(got.receives) + " received)");
    }
  return out;
}

// Builds every rank's schedule for `p->choice` and counts it into p->ranks.
std::string count_schedules(const PlanInput& in, coll::OpArgs a, Plan* p) {
  const int n = a.nranks;
  const size_t span = p->count * a.esize() * static_cast<size_t>(n);
  Reserved send(span), recv(span);
  if (!send.get() || !recv.get())
    return "cannot reserve " + std::to_string(span) + " bytes of address space for the buffers";
  std::vector<coll::ScheduleTraffic> traffic(static_cast<size_t>(n), coll::ScheduleTraffic(n));
  auto pool = std::make_shared<coll::ScratchPool>();
  a.sendbuf = send.get(), a.recvbuf = recv.get(), a.chunk = p->choice.chunk;
  for (int r = 0; r < n; ++r) {
    a.rank = r;
    coll::Schedule s(in.dtype, in.op);
    if (coll::build_schedule(a, p->choice.algo, pool, &s, &p->built) != Status::kSuccess)
      return "building rank " + std::to_string(r) + "'s schedule failed: " + last_error();
    traffic[static_cast<size_t>(r)].add(s);
    p->ranks[static_cast<size_t>(r)] = by_link(traffic[static_cast<size_t>(r)], r, in.host_of);
  }
  p->mismatches = disagreements(traffic);
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

std::string make_plan(const PlanInput& in, Plan* out) {
  const size_t esize = zcx_dtype_size(in.dtype);
  if (std::string bad = check_input(in, esize); !bad.empty()) return bad;
  const int n = static_cast<int>(in.host_of.size());
  Plan p;
  p.count = in.bytes / esize / (blocks(in.kind) ? static_cast<size_t>(n) : 1);
  const coll::OpArgs call = call_args(in, p.count);
  p.choice = coll::select(select_input(in, call));
  p.lane = p.choice.algo == Algo::kShared;
  p.ranks.assign(static_cast<size_t>(n), RankTraffic{});
  if (!p.lane)
    if (std::string e = count_schedules(in, call, &p); !e.empty()) return e;
  *out = std::move(p);
  return "";
}

}  // namespace zcx::plan
