// Enumeration of the collective matrix (matrix_cases.h).
#include "matrix/matrix_cases.h"

#include <cstdio>

namespace zcx::coll::matrix {
namespace {

struct Variant {
  Algo algo;
  bool emulated_hosts;
};

// The forced algorithms of a kind: the selector's candidates; hier also on emulated hosts
// where it can really run (N >= 3).
std::vector<Variant> variants(CollKind k, int nranks) {
  Algo cand[8];
  int nc = candidates(k, cand, 8);
  std::vector<Variant> out;
  for (int i = 0; i < nc; ++i) {
    out.push_back({cand[i], false});
    if (cand[i] == Algo::kHier && nranks >= 3) out.push_back({cand[i], true});
  }
  return out;
}

std::vector<size_t> small_counts(int n) {
  std::vector<size_t> out;
  for (size_t c : {size_t{0}, size_t{1}, static_cast<size_t>(n - 1), static_cast<size_t>(n + 1)}) {
    bool seen = false;
    for (size_t o : out) seen = seen || o == c;
    if (!seen) out.push_back(c);
  }
  return out;
}

bool blocks(CollKind k) {
  return k == CollKind::kAllgather || k == CollKind::kReducescatter || k == CollKind::kAlltoall ||
         k == CollKind::kAllgatherv || k == CollKind::kReducescatterv ||
         k == CollKind::kAlltoallv;
}

// The API count for a nominal count: large block-kind cases keep the buffer at `nominal`.
size_t api_count(CollKind k, size_t nominal, int nranks) {
  bool large = nominal >= kLargeCounts[0];
  return large && blocks(k) ? nominal / static_cast<size_t>(nranks) : nominal;
}

std::vector<int> roots(CollKind k, int n) {
  std::vector<int> out;
  if (rooted(k)) {
    for (int r = 0; r < n; ++r) out.push_back(r);
  } else if (k == CollKind::kSendRecv) {
    for (int s = 1; s < n; ++s) out.push_back(s);
  } else {
    out.push_back(0);
  }
  return out;
}

std::vector<zcx_redop_t> ops_of(CollKind k) {
  if (!reduces(k)) return {ZCX_SUM};
  return {ZCX_SUM, ZCX_PROD, ZCX_MIN, ZCX_MAX, ZCX_AVG};
}

const char* op_name(zcx_redop_t op) { return zcx_redop_name(op); }

// The full product for one group over the given nominal counts.
void product(int n, const std::vector<size_t>& counts, std::vector<Case>* out) {
  for (int k = 0; k < static_cast<int>(CollKind::kCount); ++k) {
    const CollKind kind = static_cast<CollKind>(k);
    for (const Variant& v : variants(kind, n)) {
      Case c;
      c.kind = kind, c.algo = v.algo, c.emulated_hosts = v.emulated_hosts;
      if (kind == CollKind::kBarrier) {
        c.salt = static_cast<uint32_t>(out->size());
        out->push_back(c);
        continue;
      }
      for (int dt = 0; dt < ZCX_DTYPE_COUNT; ++dt)
        for (zcx_redop_t op : ops_of(kind))
          for (size_t count : counts)
            for (int in_place = 0; in_place < (kind == CollKind::kSendRecv ? 1 : 2); ++in_place)
              for (int root : roots(kind, n)) {
                c.dtype = static_cast<zcx_dtype_t>(dt), c.op = op;
                c.count = api_count(kind, count, n), c.in_place = in_place, c.root = root;
                c.large = count >= kLargeCounts[0];
                c.salt = static_cast<uint32_t>(out->size());
                c.blocking = c.salt % 4 == 0;
                out->push_back(c);
              }
    }
  }
}

const Group kAllGroups[] = {{"shm", 1}, {"tcp", 2}, {"shm", 3}, {"tcp", 4}, {"shm", 5}, {"tcp", 8},
                            {"tcp", 1}, {"shm", 2}, {"tcp", 3}, {"shm", 4}, {"tcp", 5}, {"shm", 8}};
const Group kRootedGroups[] = {{"shm", 8}, {"tcp", 8}, {"shm", 5}, {"tcp", 5}};
const Group kEmulatedGroups[] = {{"shm", 4}, {"tcp", 8}, {"shm", 3}, {"tcp", 5}};

// The group of the next large case of kind k (rooted kinds on the largest groups, so that
// every root value is hit; send/recv never on a single rank).
Group large_group(CollKind k, bool emulated, int* next_any, int* next_rooted, int* next_emu) {
  if (emulated) return kEmulatedGroups[(*next_emu)++ % 4];
  if (rooted(k)) return kRootedGroups[(*next_rooted)++ % 4];
  for (;;) {
    Group g = kAllGroups[(*next_any)++ % 12];
    if (k != CollKind::kSendRecv || g.nranks > 1) return g;
  }
}

}  // namespace

bool reduces(CollKind k) {
  return k == CollKind::kAllreduce || k == CollKind::kReduce || k == CollKind::kReducescatter ||
         k == CollKind::kReducescatterv;
}

bool rooted(CollKind k) { return k == CollKind::kBroadcast || k == CollKind::kReduce; }

size_t v_count(size_t c, int q) {
  switch (q % 3) {
    case 0: return c / 2;
    case 1: return c;
    default: return c + (c + 1) / 2;
  }
}

std::string Case::name() const {
  char buf[200];
  snprintf(buf, sizeof buf, "#%u %s:%s%s %s %s count=%zu %s root=%d%s", salt,
           coll_kind_name(kind), algo_name(algo), emulated_hosts ? "(emulated hosts)" : "",
           zcx_dtype_name(dtype), op_name(op), count, in_place ? "in-place" : "out-of-place",
           root, blocking ? " blocking" : "");
  return buf;
}

std::vector<PlacedCase> large_tier() {
  std::vector<PlacedCase> out;
  int g = 0, next_any = 0, next_rooted = 0, next_emu = 0;
  int root_turn[9] = {};
  for (int k = 0; k < static_cast<int>(CollKind::kCount); ++k) {
    const CollKind kind = static_cast<CollKind>(k);
    if (kind == CollKind::kBarrier) continue;
    for (const Variant& v : variants(kind, 8))
      for (size_t count : kLargeCounts)
        for (int in_place = 0; in_place < (kind == CollKind::kSendRecv ? 1 : 2); ++in_place, ++g) {
          PlacedCase p;
          p.nominal_count = count;
          p.group = large_group(kind, v.emulated_hosts, &next_any, &next_rooted, &next_emu);
          const int n = p.group.nranks;
          Case& c = p.c;
          c.kind = kind, c.algo = v.algo, c.emulated_hosts = v.emulated_hosts;
          c.dtype = static_cast<zcx_dtype_t>(g % ZCX_DTYPE_COUNT);
          c.op = reduces(kind) ? static_cast<zcx_redop_t>((g + g / ZCX_DTYPE_COUNT) % ZCX_REDOP_COUNT)
                               : ZCX_SUM;
          c.count = api_count(kind, count, n), c.in_place = in_place, c.large = true;
          if (rooted(kind)) c.root = root_turn[n]++ * 3 % n;
          if (kind == CollKind::kSendRecv) c.root = 1 + root_turn[n]++ % (n - 1);
          c.blocking = g % 2 == 1;
          c.salt = 1000000u + static_cast<uint32_t>(g);
          out.push_back(p);
        }
  }
  return out;
}

std::vector<Case> cases_for(const char* provider, int nranks, bool full_matrix) {
  std::vector<Case> out;
  std::vector<size_t> counts = small_counts(nranks);
  if (full_matrix) counts.insert(counts.end(), std::begin(kLargeCounts), std::end(kLargeCounts));
  product(nranks, counts, &out);
  if (full_matrix) return out;
  for (const PlacedCase& p : large_tier())
    if (p.group.nranks == nranks && std::string(p.group.provider) == provider) out.push_back(p.c);
  return out;
}

}  // namespace zcx::coll::matrix
