// Ring and chain rank math (no I/O). A ring visits ranks in increasing order; a chain is the
// ring opened at a root (pipelined broadcast flows root -> root+1 -> ...; reduce flows back).
#pragma once

#include <cstddef>

namespace zcx::coll::patterns {

inline int ring_next(int rank, int n) { return (rank + 1) % n; }
inline int ring_prev(int rank, int n) { return (rank + n - 1) % n; }

// Ring reduce-scatter with n blocks: at step s (0 <= s < n-1) rank r sends the partial sum of
// block (r - s - 1) mod n to next and receives block (r - s - 2) mod n from prev, which it
// reduces; after n-1 steps it holds block r fully reduced. Ring allgather then sends block
// (r - s) mod n at step s and receives block (r - s - 1) mod n.
inline int ring_rs_send_block(int rank, int step, int n) { return ((rank - step - 1) % n + 2 * n) % n; }
inline int ring_rs_recv_block(int rank, int step, int n) { return ((rank - step - 2) % n + 2 * n) % n; }
inline int ring_ag_send_block(int rank, int step, int n) { return ((rank - step) % n + n) % n; }
inline int ring_ag_recv_block(int rank, int step, int n) { return ((rank - step - 1) % n + 2 * n) % n; }

// Chain rooted at root: position 0 is the root. -1 at the ends.
inline int chain_next(int rank, int root, int n) {
  int next = (rank + 1) % n;
  return next == root ? -1 : next;
}
inline int chain_prev(int rank, int root, int n) { return rank == root ? -1 : (rank + n - 1) % n; }

// Block i of `count` elements split into `parts` near-equal blocks: [offset(i), offset(i+1)).
inline size_t block_offset(size_t count, size_t parts, size_t i) {
  // count * i / parts without overflow for counts up to 2^64 / parts.
  return (count / parts) * i + (count % parts) * i / parts;
}
inline size_t block_count(size_t count, size_t parts, size_t i) {
  return block_offset(count, parts, i + 1) - block_offset(count, parts, i);
}

}  // namespace zcx::coll::patterns
