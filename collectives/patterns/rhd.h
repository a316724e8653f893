// Recursive halving-doubling rank math (no I/O), for any n. With p = the largest power of
// two <= n and rem = n - p, the first 2*rem ranks pair up in a pre-step: each even one sends
// its vector to the odd one above it and sits out; the odd ones and the ranks >= 2*rem form
// p "virtual" ranks that run the power-of-two algorithm; a post-step returns the result to
// the ranks that sat out.
#pragma once

namespace zcx::coll::patterns {

struct RhdLayout {
  int n = 1;
  int pof2 = 1;     // largest power of two <= n
  int rem = 0;      // n - pof2
  int vrank = -1;   // this rank's virtual rank, -1 if it sits out
  int partner = -1; // pre/post-step partner, -1 if none
};

inline RhdLayout rhd_layout(int rank, int n) {
  RhdLayout l;
  l.n = n;
  while (l.pof2 * 2 <= n) l.pof2 *= 2;
  l.rem = n - l.pof2;
  if (rank < 2 * l.rem) {
    l.partner = rank % 2 == 0 ? rank + 1 : rank - 1;
    l.vrank = rank % 2 == 0 ? -1 : rank / 2;
  } else {
    l.vrank = rank - l.rem;
  }
  return l;
}

// The real rank of virtual rank v.
inline int rhd_real_rank(const RhdLayout& l, int v) { return v < l.rem ? 2 * v + 1 : v + l.rem; }

// Step i (0-based) of the halving phase uses distance pof2 >> (i+1); the doubling phase
// walks the same distances back up. The partner at distance d is v ^ d.
inline int rhd_steps(const RhdLayout& l) {
  int s = 0;
  for (int d = 1; d < l.pof2; d *= 2) ++s;
  return s;
}

}  // namespace zcx::coll::patterns
