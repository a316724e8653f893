// Ring reduce-scatter and allgather phases (see patterns/ring.h for the block walk).
#include "algorithms/ring_phases.h"

#include "patterns/ring.h"

namespace zcx::coll {

using patterns::ring_next;
using patterns::ring_prev;

size_t RingBlocks::nchunks(int b) const {
  if (len[b] == 0) return 0;
  return chunk ? (len[b] + chunk - 1) / chunk : 1;
}

size_t RingBlocks::chunk_len(int b, size_t k) const {
  if (!chunk) return len[b];
  size_t start = k * chunk;
  return len[b] - start < chunk ? len[b] - start : chunk;
}

RingBlocks ring_blocks_even(size_t count, size_t esize, int n, size_t chunk) {
  RingBlocks B;
  for (int b = 0; b < n; ++b) {
    B.off.push_back(patterns::block_offset(count, n, b) * esize);
    B.len.push_back(patterns::block_count(count, n, b) * esize);
  }
  B.chunk = chunk / esize * esize;
  return B;
}

RingBlocks ring_blocks(const size_t* counts, const size_t* displs, size_t esize, int n,
                       size_t chunk) {
  RingBlocks B;
  size_t packed = 0;
  for (int b = 0; b < n; ++b) {
    B.off.push_back((displs ? displs[b] : packed) * esize);
    B.len.push_back(counts[b] * esize);
    packed += counts[b];
  }
  B.chunk = chunk / esize * esize;
  return B;
}

namespace {

void emit_rs_recvs(Schedule& s, const RingBlocks& B, int r, int n, int step, uint8_t* tmp,
                   TaskGrid* recvs) {
  int b = patterns::ring_rs_recv_block(r, step, n);
  for (size_t k = 0; k < B.nchunks(b); ++k)
    (*recvs)[b][k] = s.recv(B.peer(ring_prev(r, n)), tmp + B.chunk_off(b, k), B.chunk_len(b, k));
}

}  // namespace

void ring_reduce_scatter(Schedule& s, const RingBlocks& B, int r, int n, const uint8_t* in,
                         uint8_t* acc, uint8_t* out_own, TaskGrid* sends,
                         std::vector<int>* own_final, int in_ready) {
  sends->assign(n, {});
  TaskGrid recvs(n);
  for (int b = 0; b < n; ++b) {
    (*sends)[b].assign(B.nchunks(b), kNoTask);
    recvs[b].assign(B.nchunks(b), kNoTask);
  }
  own_final->assign(B.nchunks(r), kNoTask);
  if (n == 1) return;
  size_t total = 0;
  for (int b = 0; b < n; ++b) total = B.off[b] + B.len[b] > total ? B.off[b] + B.len[b] : total;
  auto* tmp = static_cast<uint8_t*>(s.scratch(total));
  int b0 = patterns::ring_rs_send_block(r, 0, n);
  for (size_t k = 0; k < B.nchunks(b0); ++k)
    (*sends)[b0][k] = s.send(B.peer(ring_next(r, n)), in + B.chunk_off(b0, k), B.chunk_len(b0, k),
                             {in_ready});
  emit_rs_recvs(s, B, r, n, 0, tmp, &recvs);
  for (int step = 0; step < n - 1; ++step) {
    if (step + 1 < n - 1) emit_rs_recvs(s, B, r, n, step + 1, tmp, &recvs);
    int b = patterns::ring_rs_recv_block(r, step, n);
    bool last = step == n - 2;
    for (size_t k = 0; k < B.nchunks(b); ++k) {
      size_t o = B.chunk_off(b, k), l = B.chunk_len(b, k);
      uint8_t* dst = last ? out_own + (o - B.off[b]) : acc + o;
      int x = s.reduce(dst, in + o, tmp + o, l, {recvs[b][k], in_ready});
      if (last) (*own_final)[k] = x;
      else (*sends)[b][k] = s.send(B.peer(ring_next(r, n)), dst, l, {x});
    }
  }
}

void ring_allgather(Schedule& s, const RingBlocks& B, int r, int n, const uint8_t* own_src,
                    uint8_t* out, const std::vector<int>& own_ready, const TaskGrid* war,
                    std::vector<int>* all_recvs) {
  if (n == 1) return;
  TaskGrid recvs(n);
  for (int b = 0; b < n; ++b) recvs[b].assign(B.nchunks(b), kNoTask);
  auto emit_recvs = [&](int step) {
    int b = patterns::ring_ag_recv_block(r, step, n);
    for (size_t k = 0; k < B.nchunks(b); ++k) {
      int w = war && k < (*war)[b].size() ? (*war)[b][k] : kNoTask;
      recvs[b][k] = s.recv(B.peer(ring_prev(r, n)), out + B.chunk_off(b, k), B.chunk_len(b, k), {w});
      if (all_recvs) all_recvs->push_back(recvs[b][k]);
    }
  };
  emit_recvs(0);
  for (int step = 0; step < n - 1; ++step) {
    if (step + 1 < n - 1) emit_recvs(step + 1);
    int b = patterns::ring_ag_send_block(r, step, n);
    for (size_t k = 0; k < B.nchunks(b); ++k) {
      if (step == 0) {
        int dep = k < own_ready.size() ? own_ready[k] : kNoTask;
        s.send(B.peer(ring_next(r, n)), own_src + (B.chunk_off(b, k) - B.off[b]), B.chunk_len(b, k), {dep});
      } else {
        s.send(B.peer(ring_next(r, n)), out + B.chunk_off(b, k), B.chunk_len(b, k), {recvs[b][k]});
      }
    }
  }
}

}  // namespace zcx::coll
