#include "coll/options.h"

#include "coll/names.h"

#include "common/config.h"

#include <cerrno>
#include <cstdlib>

namespace zcx::perf {
namespace {

constexpr int kDefaultIters = 20;   // nccl-tests' defaults
constexpr int kDefaultWarmup = 5;

std::string apply(const std::string& name, const std::string& value, CollOptions* o) {
  long v = 0;
  if (name == "-c" || name == "--check") {
    if (!parse_count(value, 0, 1, &v)) return name + " needs 0 or 1";
    o->check = v == 1;
  } else if (name == "-o" || name == "--op") {
    return parse_redop(value, &o->redop);
  } else if (name == "-d" || name == "--datatype") {
    return parse_dtype(value, &o->dtype);
  } else if (name == "-r" || name == "--root") {
    if (!parse_count(value, 0, 1 << 20, &v)) return name + " needs a rank >= 0";
    o->root = static_cast<int>(v);
  } else if (name == "-i" || name == "--stepbytes") {
    std::optional<size_t> bytes = config::parse_size(value);
    if (!bytes || *bytes == 0) return name + " needs a size such as 1M";
    o->step_bytes = *bytes;
  } else if (name == "--provider") {
    o->provider = value;
  } else if (name == "--algo") {
    o->algo = value;
  } else if (name == "--device") {
    if (value != "host" && value != "gpu") return name + " needs host or gpu";
    o->gpu = value == "gpu";
  } else if (name == "--overlap") {
    if (!parse_count(value, 0, 1000000, &v)) return name + " needs microseconds >= 0";
    o->overlap_poll_us = static_cast<int>(v);
  } else {
    return "unknown option '" + name + "'";
  }
  return "";
}

// nccl-tests' -f 1 means "step linearly by -i"; the shared sweep parser wants a factor >= 2,
// so a factor of 1 is taken out here. Returns true when the sweep is linear.
bool take_linear_factor(std::vector<std::string>* args, bool* has_factor) {
  for (size_t i = 0; i + 1 < args->size(); ++i) {
    const std::string& name = (*args)[i];
    if (name != "-f" && name != "--stepfactor") continue;
    *has_factor = true;
    if ((*args)[i + 1] != "1") return false;
    args->erase(args->begin() + static_cast<long>(i), args->begin() + static_cast<long>(i) + 2);
    return true;
  }
  return false;
}

}  // namespace

std::string parse_coll_options(std::vector<std::string> args, CollOptions* o) {
  if (args.empty()) return "which collective? (allreduce, broadcast, ...)";
  o->op = canonical_op(args[0]);
  if (o->op.empty()) return "unknown collective '" + args[0] + "'";
  args.erase(args.begin());
  o->sweep.iters = kDefaultIters;
  o->sweep.warmup = kDefaultWarmup;
  bool has_factor = false;
  bool linear = take_linear_factor(&args, &has_factor);
  std::string error = parse_sweep_options(&args, &o->sweep);
  for (size_t i = 0; error.empty() && i < args.size(); i += 2) {
    if (i + 1 >= args.size()) return args[i] + " needs a value (or is unknown)";
    error = apply(args[i], args[i + 1], o);
    if (!error.empty()) error += " (got '" + args[i + 1] + "')";
  }
  if (!error.empty()) return error;
  if (o->overlap_poll_us >= 0 && (o->gpu || o->op == "sendrecv"))
    return "--overlap posts the request form of a collective (zcx_i*): host buffers, and not "
           "sendrecv";
  // As in nccl-tests: a factor above 1 wins; -i alone (or with -f 1) steps linearly.
  if (linear || (!has_factor && o->step_bytes > 0)) {
    if (o->step_bytes == 0) o->step_bytes = size_t{1} << 20;  // nccl-tests' default -i
    o->sweep.factor = 1;
  }
  return "";
}

std::vector<size_t> coll_sizes(const CollOptions& o) {
  if (o.sweep.factor > 1) return sweep_sizes(o.sweep);
  std::vector<size_t> sizes;
  for (size_t s = o.sweep.min_bytes; s <= o.sweep.max_bytes; s += o.step_bytes) {
    sizes.push_back(s);
    if (s > o.sweep.max_bytes - o.step_bytes) break;
  }
  return sizes;
}

}  // namespace zcx::perf
