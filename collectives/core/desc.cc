// Descriptor comparison and formatting.
#include "core/desc.h"

#include "select/select.h"

#include <zcx/coll.h>

#include <cstdio>
#include <cstring>

namespace zcx::coll {
namespace {

void add(std::string* out, const char* what, uint64_t mine, uint64_t theirs) {
  if (mine == theirs) return;
  char buf[96];
  snprintf(buf, sizeof buf, "%s%s %llu here vs %llu there", out->empty() ? "" : ", ", what,
           static_cast<unsigned long long>(mine), static_cast<unsigned long long>(theirs));
  *out += buf;
}

void add_named(std::string* out, const char* what, const std::string& mine,
               const std::string& theirs) {
  if (mine != theirs) *out += (out->empty() ? "" : ", ") + std::string(what) + " " + mine +
                              " here vs " + theirs + " there";
}

const char* kind_name(uint8_t k) {
  return k < static_cast<int>(CollKind::kCount) ? coll_kind_name(static_cast<CollKind>(k)) : "?";
}

// Names, with the number when it is not one this build knows (a peer of another version).
std::string algo_label(uint8_t a) {
  return a < static_cast<int>(Algo::kCount) ? algo_name(static_cast<Algo>(a))
                                            : "#" + std::to_string(a);
}
std::string dtype_label(uint8_t t) { return zcx_dtype_name(static_cast<zcx_dtype_t>(t)); }
std::string redop_label(uint8_t op) { return zcx_redop_name(static_cast<zcx_redop_t>(op)); }

}  // namespace

// The reduction op only for a collective that reduces, the root only for one that has one
// (an allgather's descriptor carries sum and -1, which read as if they meant something).
std::string desc_describe(const OpDesc& d) {
  // Point-to-point calls share one descriptor with no operation number, dtype or count.
  if (d.kind == static_cast<uint8_t>(CollKind::kSendRecv)) return "point-to-point send/recv";
  const auto kind = static_cast<CollKind>(d.kind);
  const bool reduces = kind == CollKind::kAllreduce || kind == CollKind::kReduce ||
                       kind == CollKind::kReducescatter || kind == CollKind::kReducescatterv;
  const bool rooted = kind == CollKind::kBroadcast || kind == CollKind::kReduce;
  const std::string op = reduces ? " " + redop_label(d.redop) : "";
  const std::string root = rooted ? " root " + std::to_string(d.root) : "";
  char buf[160];
  snprintf(buf, sizeof buf, "%s #%llu %s%s count %llu%s algo %s", kind_name(d.kind),
           static_cast<unsigned long long>(d.seq), dtype_label(d.dtype).c_str(), op.c_str(),
           static_cast<unsigned long long>(d.count), root.c_str(),
           d.algo < static_cast<int>(Algo::kCount) ? algo_name(static_cast<Algo>(d.algo)) : "?");
  return buf;
}

std::string desc_diff(const OpDesc& mine, const OpDesc& theirs) {
  if (theirs.magic != kDescMagic || theirs.version != kDescVersion)
    return "not a zcx collective descriptor (magic/version)";
  std::string out;
  add(&out, "communicator id", mine.comm_id, theirs.comm_id);
  add(&out, "operation number", mine.seq, theirs.seq);
  if (mine.kind != theirs.kind)
    out += std::string(out.empty() ? "" : ", ") + kind_name(mine.kind) + " here vs " +
           kind_name(theirs.kind) + " there";
  add_named(&out, "dtype", dtype_label(mine.dtype), dtype_label(theirs.dtype));
  add_named(&out, "reduction op", redop_label(mine.redop), redop_label(theirs.redop));
  if (mine.root != theirs.root)  // signed: -1 (no root) must not print as 2^64 - 1
    out += std::string(out.empty() ? "" : ", ") + "root " + std::to_string(mine.root) +
           " here vs " + std::to_string(theirs.root) + " there";
  add(&out, "nranks", mine.nranks, theirs.nranks);
  add(&out, "count", mine.count, theirs.count);
  add(&out, "count/displacement arrays (hash)", mine.aux, theirs.aux);
  add_named(&out, "algorithm", algo_label(mine.algo), algo_label(theirs.algo));
  add(&out, "chunk", mine.chunk, theirs.chunk);
  add(&out, "flags", mine.flags, theirs.flags);
  return out;
}

const char* desc_mismatch_advice(const OpDesc& mine, const OpDesc& theirs) {
  OpDesc a = mine, b = theirs;
  a.algo = b.algo = 0;  // what the selector decides on each rank
  a.chunk = b.chunk = 0;
  if (memcmp(&a, &b, sizeof a) == 0)
    return "The call is the same, but the ranks planned it differently: the selector's "
           "settings (ZCX_ALGO, ZCX_CHUNK_SIZE, ZCX_COLL_*) must be equal on every rank";
  return "Every rank must issue the same collectives, in the same order, with the same "
         "arguments";
}

// Each word times its own odd constant, summed: the products are independent (a few cycles,
// not a chain of eight), and a change in any one word always changes the sum (odd numbers
// are invertible mod 2^64). A final mix spreads the bits.
uint64_t desc_hash(const OpDesc& d) {
  static constexpr uint64_t kOdd[8] = {
      0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull, 0xd6e8feb86659fd93ull,
      0xa0761d6478bd642full, 0xe7037ed1a0b428dbull, 0x8ebc6af09c88c6e3ull, 0x589965cc75374cc3ull};
  uint64_t w[8];
  static_assert(sizeof w == sizeof(OpDesc), "eight words");
  memcpy(w, &d, sizeof w);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h += w[i] * kOdd[i];
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

uint64_t hash_counts(const size_t* a, size_t n, uint64_t seed) {
  uint64_t h = seed ^ 0x9e3779b97f4a7c15ull;  // FNV-style mix of every entry
  for (size_t i = 0; a != nullptr && i < n; ++i) {
    h ^= a[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace zcx::coll
