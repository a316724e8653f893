// zcx-plan: what a collective would do, without running it. For each size: the algorithm
// and chunk zcx's selector picks (ZCX_ALGO, ZCX_CHUNK_SIZE and the ZCX_COLL_* model settings
// apply, as in a job), and the bytes and messages every rank's schedule moves, by link:
// same host (shm, cuda_ipc) or across hosts (tcp, ib, ucx). DESIGN §2's "how many bytes,
// over which link", answered before the job runs.
#include "plan.h"

#include "coll/names.h"
#include "common/config.h"
#include "engine/sweep.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using zcx::coll::CollKind;
using zcx::plan::Plan;
using zcx::plan::PlanInput;

void usage(FILE* to) {
  std::fprintf(to,
      "usage: zcx-plan <op> -n NRANKS [--hosts H | --ppn P] [options]\n"
      "\n"
      "Shows, without running anything, what zcx would do for a collective: the algorithm\n"
      "and pipeline chunk its selector picks, the cost model's estimate, and the bytes and\n"
      "messages of every rank's schedule, by link (shm: same host; net: across hosts).\n"
      "<op>: allreduce broadcast reduce allgather reducescatter alltoall (also all_reduce,\n"
      "      all_gather, reduce_scatter). Sizes count as in zcx-perf coll and nccl-tests.\n"
      "\n"
      "  -n, --nranks N          ranks in the communicator (at most 1024)\n"
      "  --hosts H               ranks spread over H hosts in blocks, as mpirun places them\n"
      "                          (default 1)\n"
      "  --ppn P                 P ranks per host instead (the last host may have fewer)\n"
      "  -b, --minbytes SIZE     smallest size (default 8; K, M, G suffixes)\n"
      "  -e, --maxbytes SIZE     largest size (default 64M)\n"
      "  -f, --stepfactor F      multiply the size by F between steps (default 4)\n"
      "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half bfloat16 float\n"
      "                          double, as zcx-perf coll (default float)\n"
      "  -o, --op OP             sum prod min max avg (default sum)\n"
      "  -r, --root R            root of broadcast and reduce (default 0)\n"
      "  --no-lane               as ZCX_COLL_SHARED_LANE=0: one host's small calls use\n"
      "                          messages instead of the shared segment\n"
      "  --cpus C                CPUs per host for its ranks (default: one per rank); fewer\n"
      "                          than a host's ranks (oversubscribed) send its large\n"
      "                          broadcasts and allgathers through the shared segment too\n"
      "  --ranks                 every rank's traffic after each size\n"
      "  --why                   the selector's reasoning (every candidate's estimate)\n"
      "  -h, --help              this text\n"
      "\n"
      "Columns: the busiest rank's messages and bytes out by link, host_out, the most bytes\n"
      "that leave one host (one NIC's load), and net_total, the bytes that cross hosts.\n"
      "'shared' is the one-host shared lane: no messages, every rank copies through one\n"
      "shared segment. Exit status 1 if a schedule's sends and receives between two ranks\n"
      "disagree (never expected), 2 on bad arguments.\n");
}

constexpr long kMaxRanks = 1024;

struct Options {
  PlanInput in;
  int nranks = 0, hosts = 1, ppn = 0;
  size_t minbytes = 8, maxbytes = size_t{64} << 20;
  long factor = 4;
  bool ranks = false, why = false;
};

// The collectives zcx-plan models (zcx-perf's names; sendrecv has no selector).
bool kind_from_name(const std::string& name, CollKind* out) {
  const std::string op = zcx::perf::canonical_op(name);
  for (CollKind k : {CollKind::kAllreduce, CollKind::kBroadcast, CollKind::kReduce,
                     CollKind::kAllgather, CollKind::kReducescatter, CollKind::kAlltoall})
    if (op == zcx::coll::coll_kind_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

// "" or what is wrong with option `name` and its value.
std::string apply(const std::string& name, const std::string& value, Options* o) {
  long v = 0;
  if (name == "-n" || name == "--nranks") {
    // Every rank's schedule is built and each pair of ranks checked: n^2 work and memory.
    if (!zcx::perf::parse_count(value, 1, kMaxRanks, &v))
      return name + " needs a rank count from 1 to " + std::to_string(kMaxRanks);
    o->nranks = static_cast<int>(v);
  } else if (name == "--hosts" || name == "--ppn" || name == "--cpus") {
    if (!zcx::perf::parse_count(value, 1, kMaxRanks, &v))
      return name + " needs a number from 1 to " + std::to_string(kMaxRanks);
    (name == "--hosts" ? o->hosts : name == "--ppn" ? o->ppn : o->in.cpus) = static_cast<int>(v);
  } else if (name == "-b" || name == "--minbytes" || name == "-e" || name == "--maxbytes") {
    auto size = zcx::config::parse_size(value);
    if (!size) return name + " needs a size such as 4096, 64K or 1G";
    (name == "-b" || name == "--minbytes" ? o->minbytes : o->maxbytes) = *size;
  } else if (name == "-f" || name == "--stepfactor") {
    if (!zcx::perf::parse_count(value, 2, 1 << 20, &o->factor)) return name + " needs a factor of 2 or more";
  } else if (name == "-d" || name == "--datatype") {
    return zcx::perf::parse_dtype(value, &o->in.dtype);
  } else if (name == "-o" || name == "--op") {
    return zcx::perf::parse_redop(value, &o->in.op);
  } else if (name == "-r" || name == "--root") {
    if (!zcx::perf::parse_count(value, 0, kMaxRanks - 1, &v)) return name + " needs a rank";
    o->in.root = static_cast<int>(v);
  } else {
    return "unknown option '" + name + "'";
  }
  return "";
}

// "" or the first problem with the command line.
std::string parse(int argc, char** argv, Options* o) {
  if (argc < 2) return "the collective is missing";
  if (!kind_from_name(argv[1], &o->in.kind)) return std::string("unknown collective '") + argv[1] + "'";
  for (int i = 2; i < argc; ++i) {
    const std::string name = argv[i];
    if (name == "--no-lane") o->in.lane = false;
    else if (name == "--ranks") o->ranks = true;
    else if (name == "--why") o->why = true;
    else if (i + 1 >= argc) return name + " needs a value";
    else if (std::string e = apply(name, argv[++i], o); !e.empty()) return e;
  }
  if (o->nranks == 0) return "-n (the rank count) is required";
  if (o->ppn && o->hosts != 1) return "--hosts and --ppn do not go together";
  if (o->minbytes > o->maxbytes) return "-b is larger than -e";
  const int ppn = o->ppn ? o->ppn : (o->nranks + o->hosts - 1) / o->hosts;
  for (int r = 0; r < o->nranks; ++r) o->in.host_of.push_back(r / ppn);
  return "";
}

size_t busiest(const Plan& p, size_t (*field)(const zcx::plan::RankTraffic&)) {
  size_t most = 0;
  for (const auto& t : p.ranks) most = std::max(most, field(t));
  return most;
}

void print_header(const Options& o) {
  const PlanInput& in = o.in;
  const int hosts = in.host_of.back() + 1;
  const bool reduces = in.kind == CollKind::kAllreduce || in.kind == CollKind::kReduce ||
                       in.kind == CollKind::kReducescatter;
  const bool rooted = in.kind == CollKind::kBroadcast || in.kind == CollKind::kReduce;
  const int per_host = (o.nranks + hosts - 1) / hosts;
  const std::string cpus = in.cpus == 0 ? ""
                           : ", " + std::to_string(in.cpus) + " CPUs per host" +
                                 (per_host > in.cpus ? " (oversubscribed)" : "");
  std::printf("# zcx-plan %s (%s%s%s%s): %d ranks on %d host%s, at most %d per host%s%s\n",
              zcx::coll::coll_kind_name(in.kind), zcx_dtype_name(in.dtype), reduces ? ", " : "",
              reduces ? zcx_redop_name(in.op) : "",
              rooted ? (", root " + std::to_string(in.root)).c_str() : "", o.nranks, hosts,
              hosts == 1 ? "" : "s", per_host, cpus.c_str(), in.lane ? "" : ", shared lane off");
  std::printf("# nothing runs: the selector's choice and every rank's schedule, counted; busiest\n"
              "# = the largest over the ranks; host_out = the most bytes leaving one host (what\n"
              "# one NIC per host carries); net_total = bytes that cross hosts, all ranks\n");
  std::printf("#%13s %12s %10s %9s %10s %9s %13s %13s %13s %13s\n", "size", "count", "algorithm",
              "chunk", "model_us", "msgs_out", "shm_out", "net_out", "host_out", "net_total");
}

void print_ranks(const Options& o, const Plan& p) {
  std::printf("#   rank host msgs_out msgs_in %13s %13s %13s %13s %13s %13s\n", "shm_out",
              "net_out", "shm_in", "net_in", "reduced", "copied");
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const auto& t = p.ranks[r];
    std::printf("#   %4zu %4d %8zu %7zu %13zu %13zu %13zu %13zu %13zu %13zu\n", r, o.in.host_of[r],
                t.msgs_out, t.msgs_in, t.out[0], t.out[1], t.in[0], t.in[1], t.reduced, t.copied);
  }
}

void print_row(const Options& o, const Plan& p, size_t bytes) {
  std::vector<size_t> host_out(static_cast<size_t>(o.in.host_of.back()) + 1);
  for (size_t r = 0; r < p.ranks.size(); ++r) host_out[static_cast<size_t>(o.in.host_of[r])] += p.ranks[r].out[1];
  size_t net_total = 0;
  for (size_t h : host_out) net_total += h;
  const char* algo = zcx::coll::algo_name(p.lane ? p.choice.algo : p.built);
  std::printf("%14zu %12zu %10s %9zu %10.1f", bytes, p.count, algo, p.choice.chunk, p.choice.est_us);
  if (p.lane) {
    std::printf(" %9s %13s %13s %13s %13s\n", "-", "-", "-", "-", "-");
  } else {
    std::printf(" %9zu %13zu %13zu %13zu %13zu\n", busiest(p, [](const auto& t) { return t.msgs_out; }),
                busiest(p, [](const auto& t) { return t.out[0]; }),
                busiest(p, [](const auto& t) { return t.out[1]; }),
                *std::max_element(host_out.begin(), host_out.end()), net_total);
  }
  if (o.why) std::printf("#   why: %s\n", p.choice.why.c_str());
  if (o.ranks && !p.lane) print_ranks(o, p);
  for (const std::string& m : p.mismatches) std::printf("# SCHEDULE ERROR: %s\n", m.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
  Options o;
  if (std::string e = parse(argc, argv, &o); !e.empty()) {
    std::fprintf(stderr, "zcx-plan: %s\n", e.c_str());
    usage(stderr);
    return 2;
  }
  print_header(o);
  bool consistent = true;
  const auto step = static_cast<size_t>(o.factor);
  // From 0 the next size is 1 (0 times the factor would stay 0 for ever).
  for (size_t bytes = o.minbytes; bytes <= o.maxbytes; bytes = bytes ? bytes * step : 1) {
    o.in.bytes = bytes;
    Plan p;
    if (std::string e = zcx::plan::make_plan(o.in, &p); !e.empty()) {
      std::fprintf(stderr, "zcx-plan: %s\n", e.c_str());
      return 2;
    }
    print_row(o, p, bytes);
    consistent &= p.mismatches.empty();
    if (bytes > o.maxbytes / step) break;  // the next size is past -e (or would overflow)
  }
  return consistent ? 0 : 1;
}
