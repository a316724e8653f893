// Pairwise exchange schedule for alltoall (no I/O): n-1 steps, one send and one receive
// per step. For a power-of-two n the partners are rank XOR step (each pair exchanges both
// ways in the same step); otherwise rank sends to rank+step and receives from rank-step.
#pragma once

namespace zcx::coll::patterns {

struct PairwiseStep {
  int send_to;
  int recv_from;
};

inline PairwiseStep pairwise_step(int rank, int n, int step) {  // 1 <= step < n
  if ((n & (n - 1)) == 0) return {rank ^ step, rank ^ step};
  return {(rank + step) % n, (rank - step + n) % n};
}

}  // namespace zcx::coll::patterns
