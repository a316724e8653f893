// Double binary tree allreduce (NCCL's "Tree"): the vector is split in two halves; half t is
// reduced up tree t and broadcast back down it, in chunks. A rank is an inner node of at most
// one tree (patterns/tree.h), so both directions of every link carry data. Up phase for all
// chunks first, then every down receive, then every down send: that order lets each phase
// pipeline without a rank's down traffic waiting behind its own up traffic.
#include "algorithms/algorithms.h"
#include "patterns/ring.h"
#include "patterns/tree.h"

#include <vector>

namespace zcx::coll {
namespace {

struct Half {
  patterns::TreeNode node;
  size_t off = 0, len = 0;   // bytes
  size_t nchunks = 0;
  std::vector<int> up, ready;  // per chunk: up send; task that makes the chunk final here
};

size_t chunk_len(const Half& h, size_t chunk, size_t k) {
  if (!chunk) return h.len;
  return h.len - k * chunk < chunk ? h.len - k * chunk : chunk;
}

void up_chunk(Schedule& s, Half& h, size_t k, size_t chunk, const uint8_t* in, uint8_t* out,
              uint8_t* const tmp[2]) {
  size_t o = h.off + k * chunk, l = chunk_len(h, chunk, k);
  int r[2] = {kNoTask, kNoTask};
  for (int j = 0; j < 2; ++j)
    if (h.node.children[j] >= 0) r[j] = s.recv(h.node.children[j], tmp[j] + o, l);
  const uint8_t* up_src = in + o;
  int x = kNoTask;
  for (int j = 0; j < 2; ++j) {
    if (h.node.children[j] < 0) continue;
    x = s.reduce(out + o, up_src, tmp[j] + o, l, {r[j], x});
    up_src = out + o;
  }
  h.ready[k] = x;
  if (h.node.parent >= 0) h.up[k] = s.send(h.node.parent, up_src, l, {x});
}

}  // namespace

Status build_allreduce_tree(const OpArgs& a, Schedule& s) {
  const size_t es = a.esize();
  auto* out = static_cast<uint8_t*>(a.recvbuf);
  auto* in = static_cast<const uint8_t*>(a.sendbuf);
  if (single_rank_copy(a, s, a.count * es)) return Status::kSuccess;
  const size_t chunk = a.chunk / es * es;
  uint8_t* tmp[2] = {static_cast<uint8_t*>(s.scratch(a.count * es)),
                     static_cast<uint8_t*>(s.scratch(a.count * es))};
  Half h[2];
  size_t kmax = 0;
  for (int t = 0; t < 2; ++t) {
    h[t].node = patterns::dbtree_node(a.rank, a.nranks, t);
    h[t].off = patterns::block_offset(a.count, 2, t) * es;
    h[t].len = patterns::block_count(a.count, 2, t) * es;
    h[t].nchunks = h[t].len == 0 ? 0 : (chunk ? (h[t].len + chunk - 1) / chunk : 1);
    h[t].up.assign(h[t].nchunks, kNoTask);
    h[t].ready.assign(h[t].nchunks, kNoTask);
    kmax = h[t].nchunks > kmax ? h[t].nchunks : kmax;
  }
  for (size_t k = 0; k < kmax; ++k)
    for (int t = 0; t < 2; ++t)
      if (k < h[t].nchunks) up_chunk(s, h[t], k, chunk, in, out, tmp);
  for (size_t k = 0; k < kmax; ++k)  // down receives overwrite what the up send read
    for (int t = 0; t < 2; ++t)
      if (k < h[t].nchunks && h[t].node.parent >= 0)
        h[t].ready[k] = s.recv(h[t].node.parent, out + h[t].off + k * chunk,
                               chunk_len(h[t], chunk, k), {h[t].up[k]});
  for (size_t k = 0; k < kmax; ++k)
    for (int t = 0; t < 2; ++t)
      for (int j = 0; j < 2 && k < h[t].nchunks; ++j)
        if (h[t].node.children[j] >= 0)
          s.send(h[t].node.children[j], out + h[t].off + k * chunk, chunk_len(h[t], chunk, k),
                 {h[t].ready[k]});
  return Status::kSuccess;
}

}  // namespace zcx::coll
