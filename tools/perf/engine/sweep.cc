#include "engine/sweep.h"

#include "common/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace zcx::perf {

bool parse_count(const std::string& text, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

uint64_t command_fingerprint(const std::vector<std::string>& args) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the arguments, each NUL-terminated
  for (const std::string& a : args)
    for (char c : a + '\0') h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

namespace {

std::string apply(const std::string& name, const std::string& value, SweepOptions* o) {
  long v = 0;
  if (name == "-b" || name == "--minbytes" || name == "-e" || name == "--maxbytes") {
    std::optional<size_t> bytes = config::parse_size(value);
    if (!bytes || *bytes > (size_t{1} << 40)) return name + " needs a size such as 8, 64K, 1M";
    (name == "-b" || name == "--minbytes" ? o->min_bytes : o->max_bytes) = *bytes;
  } else if (name == "-f" || name == "--stepfactor") {
    if (!parse_count(value, 2, 1 << 20, &v)) return name + " needs a whole factor >= 2";
    o->factor = static_cast<size_t>(v);
  } else if (name == "-n" || name == "--iters") {
    if (!parse_count(value, 1, 100000000, &v)) return name + " needs a count >= 1";
    o->iters = static_cast<int>(v);
  } else if (name == "-w" || name == "--warmup_iters") {
    if (!parse_count(value, 0, 100000000, &v)) return name + " needs a count >= 0";
    o->warmup = static_cast<int>(v);
  } else if (name == "--reps") {
    if (!parse_count(value, 1, 10000, &v)) return name + " needs a count >= 1";
    o->reps = static_cast<int>(v);
  } else {
    o->json_path = value;
  }
  return "";
}

bool is_sweep_option(const std::string& name) {
  for (const char* known : {"-b", "--minbytes", "-e", "--maxbytes", "-f", "--stepfactor", "-n",
                            "--iters", "-w", "--warmup_iters", "--reps", "--json"})
    if (name == known) return true;
  return false;
}

}  // namespace

std::string parse_sweep_options(std::vector<std::string>* args, SweepOptions* out) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& name = (*args)[i];
    if (!is_sweep_option(name)) {
      rest.push_back(name);
      continue;
    }
    if (i + 1 >= args->size()) return name + " needs a value";
    std::string error = apply(name, (*args)[++i], out);
    if (!error.empty()) return error + " (got '" + (*args)[i] + "')";
  }
  if (out->min_bytes == 0 || out->min_bytes > out->max_bytes)
    return "-b must be at least 1 and at most -e";
  *args = rest;
  return "";
}

const char* sweep_options_help() {
  return "  -b, --minbytes SIZE     smallest message (default 8; K, M, G suffixes)\n"
         "  -e, --maxbytes SIZE     largest message (default 64M)\n"
         "  -f, --stepfactor F      multiply the size by F between steps (default 2)\n"
         "  -n, --iters N           iterations per repetition (default: enough to move about\n"
         "                          1 GiB, from 20 to 1000)\n"
         "  -w, --warmup_iters N    warm-up iterations per size (default: n/10, at least 2)\n"
         "  --reps R                repetitions per size; reported: median, min, max (default 5)\n"
         "  --json FILE             also write the results as JSON (docs/PERF_JSON.md)\n";
}

std::vector<size_t> sweep_sizes(const SweepOptions& o) {
  std::vector<size_t> sizes;
  for (size_t s = o.min_bytes; s <= o.max_bytes; s *= o.factor) {
    sizes.push_back(s);
    if (s > o.max_bytes / o.factor) break;  // the next step would overflow or pass -e
  }
  return sizes;
}

int iterations_for(const SweepOptions& o, size_t bytes) {
  if (o.iters > 0) return o.iters;
  size_t n = (size_t{1} << 30) / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::clamp<size_t>(n, 20, 1000));
}

int warmup_for(const SweepOptions& o, size_t bytes) {
  if (o.warmup >= 0) return o.warmup;
  return std::max(2, iterations_for(o, bytes) / 10);
}

}  // namespace zcx::perf
