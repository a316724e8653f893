// Hierarchical allreduce for ranks spread over several hosts: a binomial reduce inside each
// host to its first rank (the leader), a ring allreduce among the leaders across hosts, and
// a binomial broadcast inside each host. Only 2 (N-1)/N of the vector crosses the network per
// host rather than per rank. Declines on one host or with one rank per host, where the flat
// algorithms serve better.
#include "algorithms/algorithms.h"
#include "algorithms/ring_phases.h"
#include "patterns/tree.h"

#include <vector>

namespace zcx::coll {
namespace {

struct Groups {
  std::vector<int> local;    // ranks on this host, ascending; local[0] is the leader
  std::vector<int> leaders;  // first rank of every host, ascending
  int li = 0, gi = -1;       // this rank's index in local / leaders
};

Groups groups(const OpArgs& a) {
  Groups g;
  std::vector<int> seen;
  for (int r = 0; r < a.nranks; ++r) {
    bool first = true;
    for (int h : seen) first = first && h != a.host_of[r];
    if (first) {
      seen.push_back(a.host_of[r]);
      if (r == a.rank) g.gi = static_cast<int>(g.leaders.size());
      g.leaders.push_back(r);
    }
    if (a.host_of[r] == a.host_of[a.rank]) {
      if (r == a.rank) g.li = static_cast<int>(g.local.size());
      g.local.push_back(r);
    }
  }
  return g;
}

}  // namespace

Status build_allreduce_hier(const OpArgs& a, Schedule& s) {
  if (a.host_of == nullptr) return Status::kUnsupported;
  Groups g = groups(a);
  const int nl = static_cast<int>(g.local.size()), ng = static_cast<int>(g.leaders.size());
  if (ng == 1 || ng == a.nranks) return Status::kUnsupported;
  const size_t es = a.esize(), bytes = a.count * es;
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  auto* in = static_cast<const uint8_t*>(a.sendbuf);
  patterns::KnomialNode node = patterns::knomial_node(g.li, nl, 0, 2);
  const bool leader = g.li == 0;
  // Phase 1: reduce inside the host.
  uint8_t* acc = leader ? out : static_cast<uint8_t*>(s.scratch(bytes));
  std::vector<int> got(node.nchildren);
  std::vector<uint8_t*> tmp(node.nchildren);
  for (int j = 0; j < node.nchildren; ++j) {
    tmp[j] = static_cast<uint8_t*>(s.scratch(bytes));
    got[j] = s.recv(g.local[node.children[j]], tmp[j], bytes);
  }
  int x = node.nchildren == 0 && leader ? s.copy(out, in, bytes) : kNoTask;
  const uint8_t* left = in;
  for (int j = 0; j < node.nchildren; ++j) {
    x = s.reduce(acc, left, tmp[j], bytes, {got[j], x});
    left = acc;
  }
  std::vector<int> final_writes;
  if (!leader) {  // up to the parent, then the result comes back down the same tree
    int up = s.send(g.local[node.parent], node.nchildren ? acc : in, bytes, {x});
    final_writes.push_back(s.recv(g.local[node.parent], out, bytes, {up}));
  } else {  // Phase 2: ring allreduce among the host leaders
    RingBlocks B = ring_blocks_even(a.count, es, ng, a.chunk);
    B.peers = g.leaders;
    TaskGrid rs_sends;
    std::vector<int> own_final;
    ring_reduce_scatter(s, B, g.gi, ng, out, out, out + B.off[g.gi], &rs_sends, &own_final, x);
    ring_allgather(s, B, g.gi, ng, out + B.off[g.gi], out, own_final, &rs_sends, &final_writes);
    final_writes.insert(final_writes.end(), own_final.begin(), own_final.end());
  }
  // Phase 3: broadcast inside the host.
  for (int j = 0; j < node.nchildren; ++j) {
    int t = s.send(g.local[node.children[j]], out, bytes);
    s.add_deps(t, final_writes);
  }
  return Status::kSuccess;
}

}  // namespace zcx::coll
