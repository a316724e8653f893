// Per-kind buffers, calls and checks of one matrix case (matrix_kinds.h).
#include "matrix/matrix_kinds.h"

#include "core/api_handles.h"
#include "matrix/matrix_data.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

namespace zcx::coll::matrix {
namespace {

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xa5, kUnwritten = 0x5a;

uint64_t mix_word(uint64_t h, const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  h = (h ^ w) * 0xff51afd7ed558ccdull;
  return h ^ (h >> 32);
}

// A buffer of elements with guard bytes on both sides; the body starts as kUnwritten.
class Guarded {
 public:
  Guarded(size_t elems, size_t esize)
      : es_(esize), bytes_(elems * esize), mem_(bytes_ + 2 * kGuard, kUnwritten) {
    std::fill(mem_.begin(), mem_.begin() + kGuard, kGuardByte);
    std::fill(mem_.end() - kGuard, mem_.end(), kGuardByte);
  }
  uint8_t* at(size_t elem) { return mem_.data() + kGuard + elem * es_; }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (mem_[i] != kGuardByte || mem_[kGuard + bytes_ + i] != kGuardByte) return false;
    return true;
  }
  std::vector<uint8_t> body() const {
    return std::vector<uint8_t>(mem_.begin() + kGuard, mem_.end() - kGuard);
  }
  bool body_is(const std::vector<uint8_t>& bytes) const {
    return std::equal(bytes.begin(), bytes.end(), mem_.begin() + kGuard);
  }
  uint64_t hash() const {  // of the body, 8 bytes at a time (a tail of < 8 bytes is left out)
    // Four independent lanes, so the multiplies overlap; then folded into one.
    uint64_t h[4] = {0x9e3779b97f4a7c15ull, 1, 2, 3};
    size_t i = 0;
    for (; i + 32 <= bytes_; i += 32)
      for (int l = 0; l < 4; ++l) h[l] = mix_word(h[l], mem_.data() + kGuard + i + 8 * l);
    for (; i + 8 <= bytes_; i += 8) h[0] = mix_word(h[0], mem_.data() + kGuard + i);
    for (int l = 1; l < 4; ++l) h[0] = (h[0] ^ h[l]) * 0xff51afd7ed558ccdull;
    return h[0];
  }
  bool unwritten(size_t first, size_t count) const {
    for (size_t i = first * es_; i < (first + count) * es_; ++i)
      if (mem_[kGuard + i] != kUnwritten) return false;
    return true;
  }

 private:
  size_t es_, bytes_;
  std::vector<uint8_t> mem_;
};

// Shared state of one case on one rank.
struct Run {
  const CaseEnv& env;
  const Case& c;
  size_t es;
  CaseResult* out;

  int me() const { return env.rank; }
  int n() const { return env.nranks; }
  void fill(int rank, size_t first, size_t count, void* dst) const {
    fill_input(c.dtype, c.op, c.salt, rank, first, count, dst);
  }
  void expect(const std::string& what, const std::string& problem) {
    if (!problem.empty()) out->wrong.push_back(what + ": " + problem);
  }
  void copied(const char* what, int src, size_t first, size_t count, const void* got) {
    auto t0 = std::chrono::steady_clock::now();
    expect(what, check_copied(c.dtype, c.op, c.salt, src, first, count, got));
    out->check_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  void reduced(const char* what, size_t first, size_t count, const void* got) {
    auto t0 = std::chrono::steady_clock::now();
    expect(what, check_reduced(c.dtype, c.op, c.salt, n(), env.depth, first, count, got));
    out->check_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  void unchanged(const Guarded& send, const std::vector<uint8_t>& before) {
    if (!send.body_is(before)) out->wrong.push_back("sendbuf changed");
  }
  // Results every rank must hold identically (allreduce, broadcast, the gathers): in a large
  // case each rank checks only its share [lo, hi) of the elements against the reference, and
  // all ranks compare a hash of the whole buffer, so the checking is split N ways instead of
  // repeated N times. Small cases: every rank checks everything.
  std::pair<size_t, size_t> share(size_t count) const {
    if (!c.large) return {0, count};
    return {count * me() / n(), count * (me() + 1) / n()};
  }
  void same_on_every_rank(const Guarded& g) {
    if (!c.large || out->status) return;
    std::vector<uint64_t> all(n(), 0), mine(1, g.hash());
    for (int q = 0; q < n(); ++q) all[q] = ~mine[0] - q;  // never equal to mine by accident
    out->status = zcx_allgather(mine.data(), all.data(), 1, ZCX_UINT64, env.comm, nullptr);
    for (int q = 0; q < n() && !out->status; ++q)
      if (all[q] != mine[0])
        out->wrong.push_back("result differs from rank " + std::to_string(q) + "'s (hash)");
  }
  void guards(const char* what, const Guarded& g) {
    if (!g.guards_intact()) out->wrong.push_back(std::string(what) + ": written outside the buffer");
  }
  // Waits for a request after checking which algorithm the planner chose. (The request is
  // passed by address: it is set by the call that makes `posted`.)
  zcx_status_t finish(zcx_status_t posted, zcx_coll_request_t* preq) {
    if (posted != ZCX_SUCCESS) return posted;
    zcx_coll_request_t req = *preq;
    Algo used = static_cast<Algo>(req->op->desc.algo);
    if (used != env.expected_algo)
      out->wrong.push_back(std::string("planner used ") + algo_name(used) + ", expected " +
                           algo_name(env.expected_algo));
    return zcx_coll_wait(req);
  }
};

void allreduce(Run& r) {
  const Case& c = r.c;
  Guarded send(c.count, r.es), recv(c.count, r.es);
  uint8_t* s = c.in_place ? recv.at(0) : send.at(0);
  r.fill(r.me(), 0, c.count, s);
  const std::vector<uint8_t> before = send.body();
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking ? zcx_allreduce(s, recv.at(0), c.count, c.dtype, c.op, r.env.comm, nullptr)
                  : r.finish(zcx_iallreduce(s, recv.at(0), c.count, c.dtype, c.op, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  auto [lo, hi] = r.share(c.count);
  r.reduced("result", lo, hi - lo, recv.at(lo));
  r.same_on_every_rank(recv);
  if (!c.in_place) r.unchanged(send, before);
  r.guards("recvbuf", recv);
}

void broadcast(Run& r) {
  const Case& c = r.c;
  Guarded send(c.count, r.es), recv(c.count, r.es);
  uint8_t* s = c.in_place ? recv.at(0) : send.at(0);
  if (r.me() == c.root) r.fill(c.root, 0, c.count, s);
  const std::vector<uint8_t> before = send.body();
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking ? zcx_broadcast(s, recv.at(0), c.count, c.dtype, c.root, r.env.comm, nullptr)
                  : r.finish(zcx_ibroadcast(s, recv.at(0), c.count, c.dtype, c.root, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  auto [lo, hi] = r.share(c.count);
  r.copied("result", c.root, lo, hi - lo, recv.at(lo));
  r.same_on_every_rank(recv);
  if (!c.in_place) r.unchanged(send, before);
  r.guards("recvbuf", recv);
}

// Out of place, non-roots pass recvbuf NULL (allowed: it is used on the root only).
void reduce(Run& r) {
  const Case& c = r.c;
  Guarded send(c.count, r.es), recv(c.count, r.es);
  const bool root = r.me() == c.root;
  uint8_t* s = c.in_place ? recv.at(0) : send.at(0);
  uint8_t* d = c.in_place || root ? recv.at(0) : nullptr;
  r.fill(r.me(), 0, c.count, s);
  const std::vector<uint8_t> before = send.body();
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking ? zcx_reduce(s, d, c.count, c.dtype, c.op, c.root, r.env.comm, nullptr)
                  : r.finish(zcx_ireduce(s, d, c.count, c.dtype, c.op, c.root, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  if (root) r.reduced("result at the root", 0, c.count, recv.at(0));
  else if (c.in_place) r.copied("non-root buffer changed", r.me(), 0, c.count, recv.at(0));
  if (!c.in_place) r.unchanged(send, before);
  r.guards("recvbuf", recv);
}

void allgather(Run& r) {
  const Case& c = r.c;
  const size_t b = c.count;
  Guarded send(b, r.es), recv(b * r.n(), r.es);
  uint8_t* s = c.in_place ? recv.at(r.me() * b) : send.at(0);
  r.fill(r.me(), 0, b, s);
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking ? zcx_allgather(s, recv.at(0), b, c.dtype, r.env.comm, nullptr)
                  : r.finish(zcx_iallgather(s, recv.at(0), b, c.dtype, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  for (int q = 0; q < r.n(); ++q)
    if (!c.large || q == (r.me() + 1) % r.n()) r.copied("block of a rank", q, 0, b, recv.at(q * b));
  r.same_on_every_rank(recv);
  r.guards("recvbuf", recv);
}

void reducescatter(Run& r) {
  const Case& c = r.c;
  const size_t b = c.count, total = b * r.n();
  Guarded send(total, r.es), recv(b, r.es);
  r.fill(r.me(), 0, total, send.at(0));
  const std::vector<uint8_t> before = send.body();
  uint8_t* d = c.in_place ? send.at(r.me() * b) : recv.at(0);
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking ? zcx_reducescatter(send.at(0), d, b, c.dtype, c.op, r.env.comm, nullptr)
                  : r.finish(zcx_ireducescatter(send.at(0), d, b, c.dtype, c.op, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  r.reduced("own block", r.me() * b, b, d);
  if (!c.in_place) r.unchanged(send, before);
  r.guards("recvbuf", c.in_place ? send : recv);
}

void alltoall(Run& r) {
  const Case& c = r.c;
  const size_t b = c.count, total = b * r.n();
  Guarded send(total, r.es), recv(total, r.es);
  uint8_t* s = c.in_place ? recv.at(0) : send.at(0);
  r.fill(r.me(), 0, total, s);
  const std::vector<uint8_t> before = send.body();
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking ? zcx_alltoall(s, recv.at(0), b, c.dtype, r.env.comm, nullptr)
                  : r.finish(zcx_ialltoall(s, recv.at(0), b, c.dtype, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  for (int p = 0; p < r.n(); ++p) r.copied("block from a rank", p, r.me() * b, b, recv.at(p * b));
  if (!c.in_place) r.unchanged(send, before);
  r.guards("recvbuf", recv);
}

// allgatherv: blocks of v_count(c, q) elements, one unwritten element between blocks.
void allgatherv(Run& r) {
  const Case& c = r.c;
  const int n = r.n();
  std::vector<size_t> counts(n), displs(n);
  for (int q = 0; q < n; ++q) {
    counts[q] = v_count(c.count, q);
    displs[q] = q ? displs[q - 1] + counts[q - 1] + 1 : 0;
  }
  Guarded send(counts[r.me()], r.es), recv(displs[n - 1] + counts[n - 1], r.es);
  uint8_t* s = c.in_place ? recv.at(displs[r.me()]) : send.at(0);
  const size_t mine = counts[r.me()];
  r.fill(r.me(), 0, mine, s);
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking
      ? zcx_allgatherv(s, mine, recv.at(0), counts.data(), displs.data(), c.dtype, r.env.comm, nullptr)
      : r.finish(zcx_iallgatherv(s, mine, recv.at(0), counts.data(), displs.data(), c.dtype, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  for (int q = 0; q < n; ++q) {
    if (!c.large || q == (r.me() + 1) % n) r.copied("block of a rank", q, 0, counts[q], recv.at(displs[q]));
    if (q + 1 < n && !recv.unwritten(displs[q] + counts[q], 1))
      r.out->wrong.push_back("the gap between blocks was written");
  }
  r.same_on_every_rank(recv);
  r.guards("recvbuf", recv);
}

void reducescatterv(Run& r) {
  const Case& c = r.c;
  const int n = r.n();
  std::vector<size_t> counts(n), prefix(n + 1, 0);
  for (int q = 0; q < n; ++q) counts[q] = v_count(c.count, q), prefix[q + 1] = prefix[q] + counts[q];
  Guarded send(prefix[n], r.es), recv(counts[r.me()], r.es);
  r.fill(r.me(), 0, prefix[n], send.at(0));
  const std::vector<uint8_t> before = send.body();
  uint8_t* d = c.in_place ? send.at(prefix[r.me()]) : recv.at(0);
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking ? zcx_reducescatterv(send.at(0), d, counts.data(), c.dtype, c.op, r.env.comm, nullptr)
                  : r.finish(zcx_ireducescatterv(send.at(0), d, counts.data(), c.dtype, c.op, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  r.reduced("own block", prefix[r.me()], counts[r.me()], d);
  if (!c.in_place) r.unchanged(send, before);
  r.guards("recvbuf", c.in_place ? send : recv);
}

// alltoallv layouts: sender s puts v_count(c, s + 2p) elements for p in peer order with a
// one-element gap; the receiver places blocks in reverse peer order, also with gaps.
struct V2vLayout {
  std::vector<size_t> scount, sdispl, rcount, rdispl;
  size_t send_extent = 0, recv_extent = 0;
};

V2vLayout v2v_layout(size_t c, int me, int n) {
  V2vLayout l;
  l.scount.resize(n), l.sdispl.resize(n), l.rcount.resize(n), l.rdispl.resize(n);
  for (int p = 0; p < n; ++p) {
    l.scount[p] = v_count(c, me + 2 * p), l.rcount[p] = v_count(c, p + 2 * me);
    l.sdispl[p] = p ? l.sdispl[p - 1] + l.scount[p - 1] + 1 : 0;
  }
  for (int p = n - 1; p >= 0; --p)
    l.rdispl[p] = p == n - 1 ? 0 : l.rdispl[p + 1] + l.rcount[p + 1] + 1;
  l.send_extent = l.sdispl[n - 1] + l.scount[n - 1];
  l.recv_extent = l.rdispl[0] + l.rcount[0];
  return l;
}

void alltoallv(Run& r) {
  const Case& c = r.c;
  const int n = r.n();
  V2vLayout l = v2v_layout(c.count, r.me(), n);
  Guarded send(l.send_extent, r.es), recv(std::max(l.send_extent, l.recv_extent), r.es);
  uint8_t* s = c.in_place ? recv.at(0) : send.at(0);
  r.fill(r.me(), 0, l.send_extent, s);
  const std::vector<uint8_t> before = send.body();
  zcx_coll_request_t req = nullptr;
  r.out->status = c.blocking
      ? zcx_alltoallv(s, l.scount.data(), l.sdispl.data(), recv.at(0), l.rcount.data(), l.rdispl.data(), c.dtype, r.env.comm, nullptr)
      : r.finish(zcx_ialltoallv(s, l.scount.data(), l.sdispl.data(), recv.at(0), l.rcount.data(), l.rdispl.data(), c.dtype, r.env.comm, nullptr, &req), &req);
  if (r.out->status) return;
  for (int p = 0; p < n; ++p) {
    V2vLayout theirs = v2v_layout(c.count, p, n);
    r.copied("block from a rank", p, theirs.sdispl[r.me()], l.rcount[p], recv.at(l.rdispl[p]));
    if (!c.in_place && p > 0 && !recv.unwritten(l.rdispl[p] + l.rcount[p], 1))
      r.out->wrong.push_back("the gap between blocks was written");
  }
  if (!c.in_place) r.unchanged(send, before);
  r.guards("recvbuf", recv);
}

// Every rank sends to rank + shift and receives from rank - shift. Blocking form: in each
// cycle of that permutation the lowest rank sends first, the others receive first (no
// deadlock with rendezvous sends); else one group.
void sendrecv(Run& r) {
  const Case& c = r.c;
  const int n = r.n(), to = (r.me() + c.root) % n, from = (r.me() - c.root + n) % n;
  Guarded send(c.count, r.es), recv(c.count, r.es);
  r.fill(r.me(), 0, c.count, send.at(0));
  zcx_comm_t comm = r.env.comm;
  auto snd = [&] { return zcx_coll_send(send.at(0), c.count, c.dtype, to, comm, nullptr); };
  auto rcv = [&] { return zcx_coll_recv(recv.at(0), c.count, c.dtype, from, comm, nullptr); };
  if (c.blocking) {
    const bool starter = r.me() < std::gcd(n, c.root);
    zcx_status_t first = starter ? snd() : rcv();
    r.out->status = first != ZCX_SUCCESS ? first : (starter ? rcv() : snd());
  } else {
    zcx_group_start();
    zcx_status_t a = snd(), b = rcv();
    zcx_status_t end = zcx_group_end();
    r.out->status = a ? a : b ? b : end;
  }
  if (r.out->status) return;
  r.copied("message", from, 0, c.count, recv.at(0));
  r.guards("recvbuf", recv);
}

void barrier(Run& r) {
  zcx_coll_request_t req = nullptr;
  r.out->status = r.c.blocking ? zcx_barrier_comm(r.env.comm, nullptr)
                               : r.finish(zcx_ibarrier_comm(r.env.comm, nullptr, &req), &req);
}

}  // namespace

CaseResult run_case(const CaseEnv& env, const Case& c) {
  CaseResult out;
  Run r{env, c, zcx_dtype_size(c.dtype), &out};
  switch (c.kind) {
    case CollKind::kAllreduce: allreduce(r); break;
    case CollKind::kBroadcast: broadcast(r); break;
    case CollKind::kReduce: reduce(r); break;
    case CollKind::kAllgather: allgather(r); break;
    case CollKind::kReducescatter: reducescatter(r); break;
    case CollKind::kAlltoall: alltoall(r); break;
    case CollKind::kAllgatherv: allgatherv(r); break;
    case CollKind::kReducescatterv: reducescatterv(r); break;
    case CollKind::kAlltoallv: alltoallv(r); break;
    case CollKind::kSendRecv: sendrecv(r); break;
    default: barrier(r); break;
  }
  return out;
}

}  // namespace zcx::coll::matrix
