#include "coll/output.h"

#include "coll/names.h"
#include "coll/ops.h"
#include "engine/report.h"

#include <zcx/zcx.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

namespace zcx::perf {
namespace {

const char* kStatistics =
    "time_us: per rank, the mean time of one call over iters calls, averaged over the ranks "
    "(nccl-tests' default); algbw = size / time (GB/s = 1e9 B/s), busbw = algbw * the "
    "nccl-tests factor of the op; with device buffers a call's time is that of iters calls "
    "enqueued on the stream up to cudaStreamSynchronize, divided by iters; median, min, max "
    "over reps repetitions; wrong: elements that differ from the expected result in one "
    "checked call, summed over the ranks";

const CollOp& op_of(const CollRun& run) { return *find_coll_op(run.options->op.c_str()); }

const char* redop_column(const CollRun& run) {
  return op_of(run).reduces ? redop_label(run.options->redop) : "none";
}

int root_column(const CollRun& run) { return op_of(run).rooted ? run.options->root : -1; }

// nccl-tests' precision rule for the time column.
std::string time_text(double us) {
  char text[32];
  std::snprintf(text, sizeof text, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  return text;
}

std::string wrong_text(int64_t wrong) { return wrong < 0 ? "N/A" : std::to_string(wrong); }

void print_placement(FILE* to, const PlacementResult& r) {
  std::fprintf(to, "  %7s  %6.2f  %6.2f  %6.2f  %6.2f  %5s", time_text(r.time_us.median).c_str(),
               r.algbw_GBps.median, r.busbw_GBps.median, r.busbw_GBps.min, r.busbw_GBps.max,
               wrong_text(r.wrong).c_str());
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

std::string summary_json(const Summary& s) {
  return "{\"median\": " + number(s.median) + ", \"min\": " + number(s.min) +
         ", \"max\": " + number(s.max) + "}";
}

std::string placement_json(const PlacementResult& r) {
  return "{\"time_us\": " + summary_json(r.time_us) + ", \"algbw_GBps\": " +
         summary_json(r.algbw_GBps) + ", \"busbw_GBps\": " + summary_json(r.busbw_GBps) +
         ", \"wrong\": " + (r.wrong < 0 ? std::string("null") : std::to_string(r.wrong)) + "}";
}

// ", \"overlap\": {...}" when measured, else nothing.
std::string overlap_json(const OverlapResult& v) {
  if (!v.measured) return "";
  return ",\n     \"overlap\": {\"poll_us\": " + std::to_string(v.poll_us) + ", \"compute_us\": " +
         number(v.compute_us) + ", \"pure_us\": " + summary_json(v.pure_us) + ", \"total_us\": " +
         summary_json(v.total_us) + ", \"overlap_pct\": " + summary_json(v.overlap_pct) + "}";
}

std::string quoted(const std::string& text) { return "\"" + json_escape(text) + "\""; }

std::string meta_json(const CollRun& run) {
  const CollOptions& o = *run.options;
  std::vector<std::pair<std::string, std::string>> meta = {
      {"zcx_version", quoted(zcx_version_string())}, {"op", quoted(o.op)},
      {"ranks", std::to_string(run.nranks)},        {"dtype", quoted(dtype_label(o.dtype))},
      {"redop", quoted(redop_column(run))},         {"root", std::to_string(root_column(run))},
      {"provider", quoted(run.provider)},           {"algo", quoted(run.algo)},
      {"reps", std::to_string(o.sweep.reps)},       {"iters", std::to_string(o.sweep.iters)},
      {"warmup", std::to_string(o.sweep.warmup)},   {"check", o.check ? "1" : "0"},
      {"device", quoted(run.device)},               {"statistics", quoted(kStatistics)}};
  std::string out = "{";
  for (size_t i = 0; i < meta.size(); ++i)
    out += (i ? ",\n    \"" : "\n    \"") + meta[i].first + "\": " + meta[i].second;
  return out + "\n  }";
}

std::string row_json(const CollRun& run, const SizeResult& r) {
  return "{\"size\": " + std::to_string(r.size) + ", \"count\": " + std::to_string(r.count) +
         ", \"type\": " + quoted(dtype_label(run.options->dtype)) + ", \"redop\": " +
         quoted(redop_column(run)) + ", \"root\": " + std::to_string(root_column(run)) +
         ", \"iters\": " + std::to_string(r.iters) + ",\n     \"out_of_place\": " +
         placement_json(r.out_of_place) + ",\n     \"in_place\": " + placement_json(r.in_place) +
         overlap_json(r.overlap) + "}";
}

}  // namespace

void print_table_header(FILE* to, const CollRun& run) {
  const CollOptions& o = *run.options;
  bool linear = o.sweep.factor <= 1;
  std::fprintf(to, "# zcx-perf coll %s: nranks %d minBytes %zu maxBytes %zu step: %zu(%s) "
               "warmup iters: %d iters: %d reps: %d validation: %d\n", o.op.c_str(), run.nranks,
               o.sweep.min_bytes, o.sweep.max_bytes, linear ? o.step_bytes : o.sweep.factor,
               linear ? "bytes" : "factor", o.sweep.warmup, o.sweep.iters, o.sweep.reps,
               o.check ? 1 : 0);
  std::fprintf(to, "# zcx %s, device: %s, provider: %s, algo: %s\n", zcx_version_string(),
               run.device.c_str(), run.provider.c_str(), run.algo.c_str());
  const bool overlap = o.overlap_poll_us >= 0;
  std::fprintf(to, "# time, algbw, busbw: median over the %d reps; bb_min, bb_max: busbw min "
               "and max over them\n", o.sweep.reps);
  if (overlap)
    std::fprintf(to, "# overlap (out of place, request form): pure = post and wait; total = "
                 "post, compute for the median pure time (zcx_coll_test every %d us of it%s), "
                 "wait; ovl = 100 * (1 - (total - compute) / pure): median, min, max\n",
                 o.overlap_poll_us, o.overlap_poll_us == 0 ? ": never" : "");
  std::fprintf(to, "#\n");
  std::fprintf(to, "# %10s  %12s  %8s  %6s  %6s  %30s%-16s  %30s%-16s\n", "", "", "", "", "",
               "out-of-place", "", "in-place", "");
  std::fprintf(to, "# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int k = 0; k < 2; ++k)
    std::fprintf(to, "  %7s  %6s  %6s  %6s  %6s %6s", "time", "algbw", "busbw", "bb_min",
                 "bb_max", "#wrong");
  if (overlap) std::fprintf(to, "  %7s  %7s  %5s  %5s  %5s", "pure", "total", "ovl", "o_min", "o_max");
  std::fprintf(to, "\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int k = 0; k < 2; ++k)
    std::fprintf(to, "  %7s  %6s  %6s  %6s  %6s %6s", "(us)", "(GB/s)", "(GB/s)", "(GB/s)",
                 "(GB/s)", "");
  if (overlap) std::fprintf(to, "  %7s  %7s  %5s  %5s  %5s", "(us)", "(us)", "(%)", "(%)", "(%)");
  std::fprintf(to, "\n");
  std::fflush(to);
}

void print_table_row(FILE* to, const CollRun& run, const SizeResult& r) {
  std::fprintf(to, "%12zu  %12zu  %8s  %6s  %6d", r.size, r.count,
               dtype_label(run.options->dtype), redop_column(run), root_column(run));
  print_placement(to, r.out_of_place);
  print_placement(to, r.in_place);
  const OverlapResult& v = r.overlap;
  if (v.measured)
    std::fprintf(to, "  %7s  %7s  %5.1f  %5.1f  %5.1f", time_text(v.pure_us.median).c_str(),
                 time_text(v.total_us.median).c_str(), v.overlap_pct.median, v.overlap_pct.min,
                 v.overlap_pct.max);
  std::fprintf(to, "\n");
  std::fflush(to);
}

void print_table_footer(FILE* to, const CollRun& run) {
  double sum = 0;
  int cells = 0;
  for (const SizeResult& r : run.rows)
    for (const PlacementResult* p : {&r.out_of_place, &r.in_place}) {
      sum += p->busbw_GBps.median;
      ++cells;
    }
  int64_t wrong = total_wrong(run);
  std::fprintf(to, "# Out of bounds values : %lld %s\n", static_cast<long long>(wrong),
               wrong ? "FAILED" : "OK");
  std::fprintf(to, "# Avg bus bandwidth    : %g \n#\n", cells ? sum / cells : 0.0);
  std::fflush(to);
}

std::string coll_json(const CollRun& run) {
  std::string out = "{\n  \"schema\": \"zcx-perf/1\",\n  \"tool\": \"zcx-perf\",\n"
                    "  \"test\": \"coll\",\n  \"meta\": " + meta_json(run) + ",\n  \"rows\": [";
  for (size_t i = 0; i < run.rows.size(); ++i)
    out += (i ? ",\n    " : "\n    ") + row_json(run, run.rows[i]);
  return out + "\n  ]\n}\n";
}

bool write_coll_json(const std::string& path, const CollRun& run, std::string* error) {
  std::ofstream file(path, std::ios::trunc);
  if (file) file << coll_json(run);
  if (file.good()) file.close();
  if (!file.good()) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

int64_t total_wrong(const CollRun& run) {
  int64_t total = 0;
  for (const SizeResult& r : run.rows)
    total += std::max<int64_t>(r.out_of_place.wrong, 0) + std::max<int64_t>(r.in_place.wrong, 0);
  return total;
}

}  // namespace zcx::perf
