// The alpha-beta cost model and the selector.
#include "select/select.h"

#include "common/config.h"
#include "common/log.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>

namespace zcx::coll {
namespace {

const config::StringParam kAlgoParam(
    "ZCX_ALGO", "",
    "collective algorithm override: 'ring' or 'allreduce:rhd,broadcast:chain' (names: ring, "
    "tree, rhd, hier, binomial, chain, pairwise, direct, shared)");
const config::SizeParam kChunkParam("ZCX_CHUNK_SIZE", 0,
                                    "collective pipeline chunk in bytes (0 = cost model)");
const config::DoubleParam kAlphaShm("ZCX_COLL_ALPHA_US_SHM", 2.0,
                                    "cost model: per-message latency between ranks of a host (us)",
                                    0, 1e9);
const config::DoubleParam kAlphaNet("ZCX_COLL_ALPHA_US_NET", 15.0,
                                    "cost model: per-message latency across hosts (us)", 0, 1e9);
const config::DoubleParam kBwShm("ZCX_COLL_BW_GBS_SHM", 10.0,
                                 "cost model: bandwidth between ranks of a host (GB/s)", 0.001,
                                 1e6);
const config::DoubleParam kBwNet("ZCX_COLL_BW_GBS_NET", 10.0,
                                 "cost model: bandwidth across hosts, one direction (GB/s)",
                                 0.001, 1e6);
const config::DoubleParam kReduceGbs("ZCX_COLL_REDUCE_GBS", 8.0,
                                     "cost model: CPU reduction throughput (GB/s)", 0.001, 1e6);

const char* const kKindNames[] = {"allreduce", "broadcast", "reduce", "allgather",
                                  "reducescatter", "alltoall", "allgatherv",
                                  "reducescatterv", "alltoallv", "barrier", "sendrecv"};
const char* const kAlgoNames[] = {"ring", "tree", "rhd", "binomial", "chain", "pairwise",
                                  "direct", "hier", "shared"};

// Direct allreduce sends (p-1) copies of the vector and keeps p of them in scratch: only for
// small vectors and few ranks (p-1 messages per rank at once).
constexpr size_t kDirectMaxBytes = 64 * 1024;
constexpr int kDirectMaxRanks = 8;

// The shared lane costs one cache-line hand-off per peer plus copying every contribution in
// and reading all of them out.
constexpr double kSharedAlphaUs = 0.1;

double lg(int p) { return std::ceil(std::log2(std::max(p, 1))); }

size_t clamp_size(double v, size_t lo, size_t hi) {
  if (!(v > static_cast<double>(lo))) return lo;
  return v > static_cast<double>(hi) ? hi : static_cast<size_t>(v);
}

// Parses ZCX_ALGO for collective `k`. Returns false when it says nothing about k. *specific:
// the entry named k ("allreduce:ring") rather than every collective ("ring").
bool algo_override(CollKind k, Algo* out, bool* specific) {
  std::string text = kAlgoParam.get();
  if (text.empty()) return false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find_first_of(",;", pos);
    std::string item = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    size_t colon = item.find(':');
    std::string coll = colon == std::string::npos ? "" : item.substr(0, colon);
    std::string name = colon == std::string::npos ? item : item.substr(colon + 1);
    if ((coll.empty() || coll == coll_kind_name(k)) && algo_from_name(name, out)) {
      *specific = !coll.empty();
      return true;
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return false;
}

void warn_once(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(what).second) ZCX_WARN(kLogTuning, "%s", what.c_str());
}

std::string human(size_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20)) snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  else if (bytes >= 1024) snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else snprintf(buf, sizeof buf, "%zu B", bytes);
  return buf;
}

}  // namespace

const char* coll_kind_name(CollKind k) { return kKindNames[static_cast<int>(k)]; }
const char* algo_name(Algo a) { return kAlgoNames[static_cast<int>(a)]; }

bool algo_from_name(const std::string& name, Algo* out) {
  for (int i = 0; i < static_cast<int>(Algo::kCount); ++i)
    if (name == kAlgoNames[i]) {
      *out = static_cast<Algo>(i);
      return true;
    }
  return false;
}

ModelParams model_params() {
  ModelParams m;
  m.alpha_us[0] = kAlphaShm.get();
  m.alpha_us[1] = kAlphaNet.get();
  m.bw_gbs[0] = std::max(kBwShm.get(), 1e-3);
  m.bw_gbs[1] = std::max(kBwNet.get(), 1e-3);
  m.reduce_gbs = std::max(kReduceGbs.get(), 1e-3);
  return m;
}

int candidates(CollKind k, Algo* out, int max) {
  auto put = [&](std::initializer_list<Algo> l) {
    int n = 0;
    for (Algo a : l)
      if (n < max) out[n++] = a;
    return n;
  };
  switch (k) {
    case CollKind::kAllreduce:
      return put({Algo::kRing, Algo::kTree, Algo::kRhd, Algo::kHier, Algo::kDirect, Algo::kShared});
    case CollKind::kBroadcast: return put({Algo::kChain, Algo::kBinomial, Algo::kShared});
    case CollKind::kReduce: return put({Algo::kChain, Algo::kBinomial, Algo::kShared});
    case CollKind::kAllgather: return put({Algo::kRing, Algo::kShared});
    case CollKind::kReducescatter: return put({Algo::kRing, Algo::kShared});
    case CollKind::kAllgatherv:
    case CollKind::kReducescatterv: return put({Algo::kRing});
    case CollKind::kAlltoall:
    case CollKind::kAlltoallv: return put({Algo::kPairwise});
    case CollKind::kBarrier: return put({Algo::kRhd, Algo::kShared});
    default: return put({Algo::kDirect});
  }
}

// The bulk lane (core/lane_bulk.cc): two hand-offs per round; what each rank copies in and
// out, where a transfer through a transport costs two copies (b) per byte it sends; the
// ranks reduce their pieces at once, from the caches (overlapped, as a chunked ring's).
namespace {

double shared_bulk_estimate_us(const SelectInput& in, double b, double gr) {
  const double p = in.nranks, n = static_cast<double>(in.bytes);
  // Bytes of the operation one round covers (allgather: p pieces of every rank's block;
  // reducescatter: one piece of every block).
  const double round_bytes = static_cast<double>(in.shared_bulk_piece) *
                             (in.kind == CollKind::kAllgather ? p * p : p);
  const double copies = in.kind == CollKind::kBroadcast   ? 2 * n
                        : in.kind == CollKind::kAllgather ? n / p + n
                        : in.kind == CollKind::kReducescatter ? (p - 1) / p * n
                                                              : (2 * p - 1) / p * n;
  const double reduced = in.kind == CollKind::kBroadcast || in.kind == CollKind::kAllgather
                             ? 0.0 : (p - 1) / p * n;
  return kSharedAlphaUs * p * (1 + 2 * std::ceil(n / round_bytes)) + copies * b / 2 +
         reduced * gr / 2;
}

}  // namespace

// Times in microseconds: alpha per message, beta = 1/B (us per byte), gamma = reduction
// (us per byte). Formulas from collectives.md §5.2; the chunked ones are our derivation: a
// pipeline of k stages-in-flight costs (depth + k - 1) stages.
double estimate_us(Algo algo, const SelectInput& in, const ModelParams& m, size_t chunk) {
  const int li = static_cast<int>(in.link);
  const double a = m.alpha_us[li], b = 1.0 / (m.bw_gbs[li] * 1e3);
  const double g = 1.0 / (m.reduce_gbs * 1e3);
  const double p = std::max(in.nranks, 1), n = static_cast<double>(in.bytes);
  const bool reduces = in.kind == CollKind::kAllreduce || in.kind == CollKind::kReduce ||
                       in.kind == CollKind::kReducescatter || in.kind == CollKind::kReducescatterv;
  const double gr = reduces ? g : 0.0;
  if (p <= 1) return 0.0;
  auto pieces = [&](double bytes) { return chunk ? std::max(1.0, std::ceil(bytes / chunk)) : 1.0; };
  switch (algo) {
    case Algo::kRing: {
      double steps = in.kind == CollKind::kAllreduce ? 2 * (p - 1) : p - 1;
      double extra = (pieces(n / p) - 1) * a / 4;  // posting cost of each extra chunk
      double red = (p - 1) / p * n * gr / (pieces(n / p) > 1 ? 2 : 1);  // overlapped when chunked
      return steps * (a + extra) + steps / p * n * b + red;
    }
    case Algo::kTree: {
      double k = pieces(n / 2), s = n / (2 * k), depth = lg(static_cast<int>(p)) + k - 1;
      return 2 * depth * (a + 2 * s * b) + depth * s * gr;
    }
    case Algo::kRhd: {
      int pof2 = 1;
      while (pof2 * 2 <= in.nranks) pof2 *= 2;
      double q = pof2, t = 2 * lg(pof2) * a + 2 * (q - 1) / q * n * b + (q - 1) / q * n * gr;
      if (in.kind == CollKind::kBarrier) t = 2 * lg(pof2) * a;
      if (pof2 != in.nranks) t += 2 * (a + n * b) + n * gr;
      return t;
    }
    case Algo::kBinomial: return lg(static_cast<int>(p)) * (a + n * b + n * gr);
    case Algo::kChain: {
      double k = pieces(n);
      return (p - 2 + k) * (a + n / k * (b + gr));
    }
    case Algo::kPairwise: return (p - 1) * (a + n / p * b);
    case Algo::kDirect:  // one step; each further message costs half a step to post and drain
      return a + (p - 2) * a / 2 + (p - 1) * n * (b + gr);
    case Algo::kShared:
      if (!shared_lane_bulk(in)) return kSharedAlphaUs * p + (p - 1) * n * (b + gr);
      return shared_bulk_estimate_us(in, b, gr);
    case Algo::kHier: {  // binomial reduce + bcast inside a host, ring across hosts
      const double as = m.alpha_us[0], bs = 1.0 / (m.bw_gbs[0] * 1e3);
      double local = lg(in.ppn);
      SelectInput leaders = in;
      leaders.nranks = in.nnodes;
      return 2 * local * (as + n * bs) + local * n * gr +
             estimate_us(Algo::kRing, leaders, m, chunk);
    }
    default: return a + n * b;
  }
}

size_t model_chunk(Algo algo, const SelectInput& in, const ModelParams& m) {
  const int li = static_cast<int>(in.link);
  const double a = m.alpha_us[li], b = 1.0 / (m.bw_gbs[li] * 1e3);
  const double p = std::max(in.nranks, 1), n = static_cast<double>(in.bytes);
  switch (algo) {
    case Algo::kRing: return clamp_size(n / p / 4, 64 << 10, 1 << 20);
    case Algo::kTree: {  // k = sqrt((depth - 1) n b / a) minimises the pipelined formula
      double k = std::sqrt(std::max(lg(static_cast<int>(p)) - 1, 1.0) * n / 2 * b / a);
      return clamp_size(n / 2 / std::max(k, 1.0), 32 << 10, 2 << 20);
    }
    case Algo::kChain: {
      double k = std::sqrt(std::max(p - 2, 1.0) * n * b / a);
      return clamp_size(n / std::max(k, 1.0), 32 << 10, 4 << 20);
    }
    default: return 0;
  }
}

size_t shared_bulk_piece(int nranks, size_t budget) {
  if (nranks < 2) return 0;
  const size_t n = static_cast<size_t>(nranks);
  size_t piece = std::min(kSharedBulkMaxPiece, budget / (n * (n + 1))) / 4096 * 4096;
  return piece >= kSharedBulkMinPiece ? piece : 0;
}

namespace {

// Bytes of one rank's contribution (allgather, reducescatter: its block).
size_t per_rank_bytes(const SelectInput& in) {
  const bool blocks = in.kind == CollKind::kAllgather || in.kind == CollKind::kReducescatter;
  return blocks ? in.bytes / static_cast<size_t>(std::max(in.nranks, 1)) : in.bytes;
}

// What a slot computes (algorithms/shared.cc).
bool slot_kind(CollKind k) {
  return k == CollKind::kAllreduce || k == CollKind::kBroadcast || k == CollKind::kReduce ||
         k == CollKind::kAllgather || k == CollKind::kBarrier;
}

}  // namespace

bool shared_lane_bulk(const SelectInput& in) {
  if (in.shared_bulk_piece == 0 || per_rank_bytes(in) == 0) return false;
  switch (in.kind) {
    case CollKind::kReducescatter: return true;  // no slot form
    case CollKind::kAllreduce:
    case CollKind::kReduce:
    case CollKind::kBroadcast:
    case CollKind::kAllgather: return per_rank_bytes(in) > kSharedMaxBytes;
    default: return false;
  }
}

bool shared_lane_fits(const SelectInput& in) {
  if (!in.shared_lane || in.nranks < 2 || in.nranks > kSharedMaxRanks) return false;
  return (slot_kind(in.kind) && per_rank_bytes(in) <= kSharedMaxBytes) || shared_lane_bulk(in);
}

namespace {

// The bulk lane kinds the model may choose: those that reduce, where reading the peers'
// data in place saves a pass over memory. Its broadcast and allgather only copy, and
// their steps cannot overlap as a transport's pipeline does (the root copies in, then the
// others copy out): with a CPU per rank they lost to chain/ring up to 512 KiB and won by
// 10-20% from 4 MiB. With more ranks than CPUs, the copies of all ranks share the CPUs,
// and the lane copies fewer bytes in all (a broadcast: p*n against chain's 2(p-1)*n): it
// won by 1.2-2x at 3 and 4 ranks on 2 CPUs (docs/TUNING.md). ZCX_ALGO=broadcast:shared or
// allgather:shared forces them.
bool bulk_by_model(const SelectInput& in) {
  const CollKind k = in.kind;
  return k == CollKind::kAllreduce || k == CollKind::kReduce || k == CollKind::kReducescatter ||
         in.oversubscribed != Oversubscribed::kNo;
}

// Whether `algo` can serve `in` at all (the others are left out of the table).
bool applies(Algo algo, const SelectInput& in) {
  switch (algo) {
    case Algo::kHier: return in.nnodes > 1 && in.nnodes < in.nranks;
    case Algo::kDirect:
      return in.nranks <= kDirectMaxRanks &&
             in.bytes * (std::max(in.nranks, 1) - 1) <= kDirectMaxBytes;
    case Algo::kShared:  // the bulk lane's broadcast and allgather, see bulk_by_model
      return shared_lane_fits(in) && (!shared_lane_bulk(in) || bulk_by_model(in));
    default: return true;
  }
}

// Where the reading weighs in the choice (a bulk-lane call), what it is.
const char* oversubscribed_mark(const SelectInput& in) {
  if (in.oversubscribed == Oversubscribed::kNo || !shared_lane_fits(in) || !shared_lane_bulk(in))
    return "";
  return in.oversubscribed == Oversubscribed::kYes ? " oversubscribed" : " oversubscribed?";
}

}  // namespace

Choice select(const SelectInput& in) {
  ModelParams m = model_params();
  Algo cand[8];
  int nc = candidates(in.kind, cand, 8);
  Choice best;
  best.algo = cand[0];
  best.est_us = -1;
  char buf[96];
  snprintf(buf, sizeof buf, "%s %s p=%d %s%s:", coll_kind_name(in.kind),
           human(in.bytes).c_str(), in.nranks, in.link == LinkClass::kNet ? "net" : "shm",
           oversubscribed_mark(in));
  std::string table = buf;
  for (int i = 0; i < nc; ++i) {
    if (!applies(cand[i], in)) continue;
    double t = estimate_us(cand[i], in, m, model_chunk(cand[i], in, m));
    snprintf(buf, sizeof buf, " %s %.1fus", algo_name(cand[i]), t);
    table += buf;
    if (best.est_us < 0 || t < best.est_us) best.algo = cand[i], best.est_us = t;
  }
  std::string source = "model";
  Algo forced;
  bool specific = false;
  if (algo_override(in.kind, &forced, &specific)) {
    if (forced == Algo::kShared && !shared_lane_fits(in)) {
      // Not an error: one setting serves every size, and the lane takes only small ones.
      // Like a declining builder, it falls back to the collective's default algorithm.
      best.algo = cand[0];
      source = "ZCX_ALGO=shared does not fit: default";
    } else if (std::find(cand, cand + nc, forced) != cand + nc) {
      best.algo = forced;
      source = "ZCX_ALGO";
    } else if (specific) {
      warn_once(std::string("ZCX_ALGO=") + kAlgoParam.get() + ": " + algo_name(forced) +
                " does not implement " + coll_kind_name(in.kind) + "; using the cost model");
    }
  }
  size_t forced_chunk = kChunkParam.get();
  best.chunk = forced_chunk ? forced_chunk : model_chunk(best.algo, in, m);
  best.est_us = estimate_us(best.algo, in, m, best.chunk);
  snprintf(buf, sizeof buf, " -> %s (%s), chunk %s%s", algo_name(best.algo), source.c_str(),
           best.chunk ? human(best.chunk).c_str() : "none",
           forced_chunk ? " (ZCX_CHUNK_SIZE)" : "");
  best.why = table + buf;
  ZCX_INFO(kLogTuning, "%s", best.why.c_str());
  return best;
}

}  // namespace zcx::coll
