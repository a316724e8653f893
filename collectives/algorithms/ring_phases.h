// The two phases every ring collective is made of, over blocks of arbitrary sizes and with
// each block cut into chunks so that consecutive chunks pipeline along the ring.
#pragma once

#include "schedule/schedule.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zcx::coll {

struct RingBlocks {
  std::vector<size_t> off, len;  // bytes, one entry per rank
  size_t chunk = 0;              // bytes per message, a multiple of the element size
  std::vector<int> peers;        // ring position -> communicator rank (empty: identity)
  int peer(int pos) const { return peers.empty() ? pos : peers[pos]; }
  size_t nchunks(int b) const;
  size_t chunk_off(int b, size_t k) const { return off[b] + k * chunk; }
  size_t chunk_len(int b, size_t k) const;
};
// Equal-ish blocks of count elements (allreduce).
RingBlocks ring_blocks_even(size_t count, size_t esize, int n, size_t chunk);
// Explicit element counts/displacements (V forms); displs null = packed.
RingBlocks ring_blocks(const size_t* counts, const size_t* displs, size_t esize, int n,
                       size_t chunk);

using TaskGrid = std::vector<std::vector<int>>;  // [block][chunk] -> task

// Reduce-scatter: `in` holds the full vector (ready after task in_ready); partial sums go to
// acc (full layout), the own block's final value to out_own. sends[b][k] gets the send task
// of each chunk; own_final[k] the task that writes the own block's chunk k. r and n are the
// position in, and the length of, the ring.
void ring_reduce_scatter(Schedule& s, const RingBlocks& B, int r, int n, const uint8_t* in,
                         uint8_t* acc, uint8_t* out_own, TaskGrid* sends,
                         std::vector<int>* own_final, int in_ready = kNoTask);
// Allgather: block r is sent from own_src (after own_ready[k]); every other block is received
// into out at its offset (after war[b][k], if given: earlier readers of that memory).
// recvs (optional) collects every receive task.
void ring_allgather(Schedule& s, const RingBlocks& B, int r, int n, const uint8_t* own_src,
                    uint8_t* out, const std::vector<int>& own_ready, const TaskGrid* war,
                    std::vector<int>* recvs = nullptr);

}  // namespace zcx::coll
