#include "p2p/p2p.h"

#include "base/registry.h"
#include "common/bootstrap/bootstrap.h"
#include "common/log.h"
#include "engine/report.h"
#include "engine/sweep.h"
#include "p2p/link.h"
#include "p2p/measure.h"

#include <zcx/zcx.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <memory>

namespace zcx::perf {
namespace {

constexpr size_t kSmallMessage = 64 * 1024;  // below this the default window is deeper

struct P2pOptions {
  SweepOptions sweep;
  std::string provider = "tcp";
  int device = 0;
  bool lat = true, bw = true;
  int window = 0;  // 0: 64 below 64 KiB, 16 from there
};

std::string parse_int_option(const std::string& name, const std::string& text, int lo, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < lo || v > 1000000)
    return name + " needs a whole number >= " + std::to_string(lo) + " (got '" + text + "')";
  *out = static_cast<int>(v);
  return "";
}

std::string apply_option(const std::string& name, const std::string& value, P2pOptions* o) {
  if (name == "--provider") {
    o->provider = value;
  } else if (name == "--device") {
    return parse_int_option(name, value, 0, &o->device);
  } else if (name == "--window") {
    return parse_int_option(name, value, 1, &o->window);
  } else if (name == "-t" || name == "--test") {
    if (value != "lat" && value != "bw" && value != "both")
      return "-t needs lat, bw or both (got '" + value + "')";
    o->lat = value != "bw";
    o->bw = value != "lat";
  } else {
    return "unknown option '" + name + "'";
  }
  return "";
}

std::string parse_p2p_options(std::vector<std::string> args, P2pOptions* o) {
  std::string error = parse_sweep_options(&args, &o->sweep);
  for (size_t i = 0; error.empty() && i < args.size(); ++i) {
    if (i + 1 >= args.size()) return args[i] + " needs a value (or is unknown)";
    error = apply_option(args[i], args[i + 1], o);
    ++i;
  }
  return error;
}

int window_for(const P2pOptions& o, const zcx_device_props_t& props, size_t bytes) {
  int w = o.window > 0 ? o.window : bytes < kSmallMessage ? 64 : 16;
  return props.max_requests > 0 && w > props.max_requests ? props.max_requests : w;
}

Status check_same_arguments(Bootstrap& bs, const std::vector<std::string>& args) {
  std::vector<uint64_t> all(static_cast<size_t>(bs.nranks()));
  all[static_cast<size_t>(bs.rank())] = command_fingerprint(args);
  ZCX_TRY(bs.allgather(all.data(), sizeof(uint64_t)));
  for (int r = 0; r < bs.nranks(); ++r)
    if (all[static_cast<size_t>(r)] != all[0])
      return set_error(Status::kMismatch, kLogNet, "rank %d runs zcx-perf with other options "
                       "than rank 0; every rank must get the same arguments", r);
  return Status::kSuccess;
}

Status repeat(int reps, std::vector<double>* samples, const std::function<Status(double*)>& rep) {
  for (int i = 0; i < reps; ++i) {
    double v = 0;
    ZCX_TRY(rep(&v));
    samples->push_back(v);
  }
  return Status::kSuccess;
}

Status measure_size(Link& link, int rank, const P2pOptions& o, size_t bytes, Row* row) {
  ZCX_TRY(verify_exchange(link, rank, bytes));
  int iters = iterations_for(o.sweep, bytes), warm = warmup_for(o.sweep, bytes);
  int window = window_for(o, link.props(), bytes);
  std::optional<Summary> lat, bw;
  std::vector<double> samples, per_iter;
  double ignored = 0, typical = std::nan("");
  if (o.lat) {
    if (warm > 0) ZCX_TRY(latency_rep(link, rank, bytes, warm, &ignored));
    ZCX_TRY(repeat(o.sweep.reps, &samples, [&](double* v) {
      return latency_rep(link, rank, bytes, iters, v, &per_iter);
    }));
    lat = summarize(samples);
    typical = summarize(per_iter).median;
  }
  if (o.bw) {
    samples.clear();
    if (warm > 0) ZCX_TRY(bandwidth_rep(link, rank, bytes, warm, window, &ignored));
    ZCX_TRY(repeat(o.sweep.reps, &samples,
                   [&](double* v) { return bandwidth_rep(link, rank, bytes, iters, window, v); }));
    bw = summarize(samples);
  }
  *row = {{"size", static_cast<int64_t>(bytes)}, {"iters", static_cast<int64_t>(iters)},
          {"window", static_cast<int64_t>(o.bw ? window : 0)}, {"lat_us", lat, 2},
          {"bw_GBps", bw, 3}, {"lat_us_typ", typical, 2}};
  return Status::kSuccess;
}

void describe_run(Report* report, const P2pOptions& o, const Link& link, Bootstrap& bs) {
  report->add_meta("zcx_version", zcx_version_string());
  report->add_meta("provider", o.provider);
  report->add_meta("device", link.props().name);
  report->add_meta("ranks", "0 (" + bs.host(0) + ") -> 1 (" + bs.host(1) + ")");
  report->add_meta("reps", static_cast<int64_t>(o.sweep.reps));
  report->add_meta("latency", "one-way = ping-pong round trip / 2, microseconds");
  report->add_meta("bandwidth", "GB/s = 1e9 bytes/s, rank 0 -> rank 1, window messages in "
                                "flight, clock stopped by rank 1's acknowledgement");
  report->add_meta("statistics", "median, min, max over reps; each rep = iters iterations; "
                                 "lat_us_typ: median over single iterations (perftest t_typical)");
}

Status run(const P2pOptions& o, const std::vector<std::string>& args, Report* report,
           int* rank) {
  const zcx_provider_ops_t* ops = provider_find(o.provider);
  if (ops == nullptr)
    return set_error(Status::kNoDevice, kLogNet, "provider '%s' is not in this build "
                     "(zcx-info lists the built ones)", o.provider.c_str());
  std::unique_ptr<Bootstrap> bs;
  ZCX_TRY(Bootstrap::init_from_env(&bs));
  *rank = bs->rank();
  if (bs->nranks() != 2)
    return set_error(Status::kInvalidUsage, kLogNet, "p2p needs exactly 2 ranks, the job has "
                     "%d (zcx-run -np 2 -- zcx-perf p2p ...)", bs->nranks());
  ZCX_TRY(check_same_arguments(*bs, args));
  std::unique_ptr<Link> link;
  ZCX_TRY(Link::open(ops, o.device, *bs, 1 - bs->rank(), o.sweep.max_bytes, &link));
  describe_run(report, o, *link, *bs);
  std::vector<size_t> sizes = sweep_sizes(o.sweep);
  bool first = true;
  for (size_t bytes : sizes) {
    if (link->props().max_message > 0 && bytes > link->props().max_message) break;
    Row row;
    ZCX_TRY(measure_size(*link, bs->rank(), o, bytes, &row));
    if (bs->rank() != 0) continue;
    if (first) report->print_header(stdout, row);
    first = false;
    report->print_row(stdout, row);
    report->add_row(std::move(row));
  }
  return bs->barrier();
}

}  // namespace

void p2p_usage(FILE* to) {
  std::fprintf(to,
      "usage: zcx-run -np 2 -- zcx-perf p2p [options]\n"
      "\n"
      "Point-to-point latency and bandwidth between rank 0 and rank 1 over one provider,\n"
      "used through its ops table directly (perftest conventions). For each message size:\n"
      "  lat_us   one-way latency = ping-pong round trip / 2, in microseconds\n"
      "  bw_GBps  rank 0 -> rank 1 bandwidth in GB/s (1e9 bytes/s) with a window of\n"
      "           messages in flight, timed on rank 0 until rank 1 acknowledges the last\n"
      "Each is measured --reps times (each rep = n iterations, after w warm-up iterations)\n"
      "and reported as median, min and max; lat_us_typ is the median over single round\n"
      "trips (perftest's t_typical), robust against a busy host. Before a size is timed,\n"
      "one message each way is checked byte by byte. Both ranks must get the same options.\n"
      "\n"
      "  --provider NAME         tcp, shm, ib, ucx or cuda_ipc (default tcp; host memory)\n"
      "  --device D              device index of the provider (default 0; zcx-info lists)\n"
      "  -t, --test lat|bw|both  what to measure (default both)\n"
      "  --window W              bandwidth messages in flight (default 64 below 64 KiB,\n"
      "                          16 from 64 KiB; at most the device's max requests)\n"
      "%s"
      "\n"
      "Example: zcx-run -np 2 -- zcx-perf p2p --provider tcp -b 8 -e 64M -f 4 --json p2p.json\n",
      sweep_options_help());
}

int p2p_main(std::vector<std::string> args) {
  for (const std::string& a : args)
    if (a == "-h" || a == "--help") {
      p2p_usage(stdout);
      return 0;
    }
  P2pOptions o;
  std::string error = parse_p2p_options(args, &o);
  if (!error.empty()) {
    std::fprintf(stderr, "zcx-perf p2p: %s (see zcx-perf p2p --help)\n", error.c_str());
    return 2;
  }
  Report report("zcx-perf", "p2p");
  int rank = -1;
  Status s = run(o, args, &report, &rank);
  if (s != Status::kSuccess) {
    std::fprintf(stderr, "zcx-perf p2p: %s\n", last_error());
    return 1;
  }
  if (o.sweep.json_path.empty() || rank != 0) return 0;
  if (!report.write_json(o.sweep.json_path, &error)) {
    std::fprintf(stderr, "zcx-perf p2p: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace zcx::perf
