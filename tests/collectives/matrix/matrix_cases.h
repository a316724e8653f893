// The collective matrix: which cases run, in which process group, in which tier.
//
// A case is one collective call: kind x forced algorithm (ZCX_ALGO) x dtype x op x count x
// in place or not x root, on every rank of one group of N processes over one provider.
// Tiers:
//  - CI (default): for every N in {1, 2, 3, 4, 5, 8} and both providers, the full product
//    over the small counts {0, 1, N-1, N+1}; plus the large counts {1000003, 8 Mi} over every
//    kind x algorithm x in/out of place, each run once, on a (provider, N) group, dtype, op
//    and root chosen by rotation (deterministic; LargeTier.RotationCoversEveryValue checks
//    that every dtype, op, root value, provider and N is hit).
//  - ZCX_TEST_FULL_MATRIX=1: the full product over all six counts in every group.
// Counts: `count` is the API's count (per-rank block for allgather, reducescatter and
// alltoall; the base of the per-rank counts of the V forms, see v_count). For those kinds
// a large count is the whole buffer: the block is count / N, so that an 8 Mi case stays
// 8 Mi elements per buffer whatever N is.
// Algorithms come from the selector's own candidate lists (select.h), so an algorithm added
// there joins the matrix. hier runs twice: on the plain communicator, where all ranks share a
// host and it declines (the ring runs instead), and on one with emulated hosts (tcp between
// them) where it really runs (N >= 3).
#pragma once

#include "select/select.h"

#include <zcx/coll.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zcx::coll::matrix {

inline constexpr size_t kLargeCounts[] = {1000003, size_t{8} << 20};
inline constexpr int kGroupSizes[] = {1, 2, 3, 4, 5, 8};
inline constexpr const char* kProviders[] = {"shm", "tcp"};

struct Case {
  CollKind kind = CollKind::kAllreduce;
  Algo algo = Algo::kRing;
  bool emulated_hosts = false;  // run on the communicator whose ranks sit on 2-3 fake hosts
  zcx_dtype_t dtype = ZCX_INT32;
  zcx_redop_t op = ZCX_SUM;     // ZCX_SUM for kinds that do not reduce
  size_t count = 0;             // API count (see above); send/recv: elements per message
  bool in_place = false;
  int root = 0;                 // broadcast/reduce root; send/recv: the shift (to rank + root)
  bool blocking = false;        // blocking call, else the zcx_i* form + zcx_coll_wait
  bool large = false;           // one of kLargeCounts (timed apart from the small ones)
  uint32_t salt = 0;            // makes the inputs of this case unique
  std::string name() const;
};

// Where a large case runs.
struct Group {
  const char* provider;
  int nranks;
};

bool reduces(CollKind k);
bool rooted(CollKind k);
// Per-rank element count of rank q in the V forms (and alltoallv's count from q to p, with
// q = 2p + sender): c/2, c or 3c/2 by q mod 3, so blocks differ and some may be empty.
size_t v_count(size_t c, int q);

// Every case of one group, in run order (identical on every rank).
std::vector<Case> cases_for(const char* provider, int nranks, bool full_matrix);

// The large-count cases of the CI tier with the group each runs in.
struct PlacedCase {
  Group group;
  size_t nominal_count;  // the entry of kLargeCounts (c.count may be a per-rank block)
  Case c;
};
std::vector<PlacedCase> large_tier();

}  // namespace zcx::coll::matrix
