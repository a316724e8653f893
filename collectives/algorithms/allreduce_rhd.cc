// Rabenseifner allreduce: reduce-scatter by recursive halving (distance p/2, p/4, ... 1, so
// virtual rank v ends with block v), then allgather by recursive doubling, over the largest
// power of two p' <= n ranks; the other n - p' ranks hand their vector to a partner first
// and get the result back at the end (patterns/rhd.h). 2 lg p' steps; bandwidth
// 2(p'-1)/p' n. Also the barrier (1 byte).
#include "algorithms/algorithms.h"
#include "patterns/rhd.h"
#include "patterns/ring.h"

#include <vector>

namespace zcx::coll {
namespace {

struct Window {
  size_t count, es;
  int pof2;
  size_t off(int block) const { return patterns::block_offset(count, pof2, block) * es; }
  size_t len(int lo, int hi) const { return off(hi) - off(lo); }
};

}  // namespace

Status build_allreduce_rhd(const OpArgs& a, Schedule& s) {
  const size_t es = a.esize(), bytes = a.count * es;
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  auto* in = static_cast<const uint8_t*>(a.sendbuf);
  patterns::RhdLayout L = patterns::rhd_layout(a.rank, a.nranks);
  if (L.vrank < 0) {  // hand the vector over, get the result back
    int sent = s.send(L.partner, in, bytes);
    s.recv(L.partner, out, bytes, {sent});
    return Status::kSuccess;
  }
  auto* tmp = static_cast<uint8_t*>(s.scratch(bytes));
  std::vector<int> writers;  // tasks that wrote into out so far
  if (L.partner >= 0) {
    int r = s.recv(L.partner, tmp, bytes);
    writers.push_back(s.reduce(out, in, tmp, bytes, {r}));
  } else {
    writers.push_back(s.copy(out, in, bytes));
  }
  const Window w{a.count, es, L.pof2};
  const int v = L.vrank;
  int lo = 0, hi = L.pof2;
  std::vector<int> halving_sends;
  for (int mask = L.pof2 / 2; mask >= 1; mask /= 2) {
    int peer = patterns::rhd_real_rank(L, v ^ mask), mid = (lo + hi) / 2;
    int slo = (v & mask) ? lo : mid, shi = (v & mask) ? mid : hi;
    int klo = (v & mask) ? mid : lo, khi = (v & mask) ? hi : mid;
    int snd = s.send(peer, out + w.off(slo), w.len(slo, shi));
    s.add_deps(snd, writers);
    halving_sends.push_back(snd);
    int rcv = s.recv(peer, tmp + w.off(klo), w.len(klo, khi));
    s.add_deps(rcv, writers);  // tmp was read by the previous reduction
    int x = s.reduce(out + w.off(klo), out + w.off(klo), tmp + w.off(klo), w.len(klo, khi), {rcv});
    s.add_deps(x, writers);
    if (x != kNoTask) writers.push_back(x);
    lo = klo, hi = khi;
  }
  for (int mask = 1; mask < L.pof2; mask *= 2) {
    int peer = patterns::rhd_real_rank(L, v ^ mask), width = hi - lo;
    int plo = (v & mask) ? lo - width : hi, phi = plo + width;
    int snd = s.send(peer, out + w.off(lo), w.len(lo, hi));
    s.add_deps(snd, writers);
    int rcv = s.recv(peer, out + w.off(plo), w.len(plo, phi));
    s.add_deps(rcv, halving_sends);  // we sent that region during the halving
    if (rcv != kNoTask) writers.push_back(rcv);
    lo = plo < lo ? plo : lo, hi = phi > hi ? phi : hi;
  }
  if (L.partner >= 0) {
    int snd = s.send(L.partner, out, bytes);
    s.add_deps(snd, writers);
  }
  return Status::kSuccess;
}

Status build_barrier(const OpArgs& a, Schedule& s) {
  OpArgs b = a;
  b.dtype = ZCX_UINT8;
  b.op = ZCX_MAX;
  b.count = 1;
  // The byte's value is never read: the exchange is the barrier. It is left as the scratch
  // holds it, since the scratch of a stream-ordered barrier is device memory, which host
  // code must not touch.
  b.recvbuf = s.scratch(1);
  b.sendbuf = b.recvbuf;
  return build_allreduce_rhd(b, s);
}

}  // namespace zcx::coll
