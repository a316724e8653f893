#include "memcpy/memcpy.h"

#include "engine/report.h"
#include "engine/stats.h"
#include "engine/sweep.h"
#include "engine/timer.h"

#include <zcx/zcx.h>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <barrier>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <exception>
#include <thread>

namespace zcx::perf {
namespace {

constexpr size_t kAlignment = 4096;

struct MemcpyOptions {
  SweepOptions sweep;
  int copies = 0;  // 0: one per CPU this process may run on
};

struct FreeBuffer {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeBuffer>;

// One copying thread: its CPU, its own source and destination, and what it measured for
// the current size.
struct Copier {
  int cpu = 0;
  Buffer src, dst;
  bool touched = false;
  std::vector<double> per_copy_us;  // per repetition: elapsed / iters
  int64_t wrong = 0;                // destination bytes that differ from the source
};

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::string parse_memcpy_options(std::vector<std::string> args, MemcpyOptions* o) {
  std::string error = parse_sweep_options(&args, &o->sweep);
  if (!error.empty()) return error;
  for (size_t i = 0; i < args.size(); i += 2) {
    if (args[i] != "--copies") return "unknown option '" + args[i] + "'";
    long v = 0;
    if (i + 1 >= args.size() || !parse_count(args[i + 1], 1, 1024, &v))
      return "--copies needs a count from 1 to 1024";
    o->copies = static_cast<int>(v);
  }
  return "";
}

void copy_once(Copier& c, size_t bytes) {
  std::memcpy(c.dst.get(), c.src.get(), bytes);
  asm volatile("" ::: "memory");  // every copy is made: none is merged with the next one
}

int64_t differing_bytes(const Copier& c, size_t bytes) {
  if (std::memcmp(c.dst.get(), c.src.get(), bytes) == 0) return 0;
  int64_t n = 0;
  for (size_t i = 0; i < bytes; ++i) n += c.dst.get()[i] != c.src.get()[i];
  return n;
}

// Pinned first, so that the pages are first touched (and placed) from the copier's CPU.
void pin_and_touch(Copier& c, size_t capacity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(c.cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // unpinned still measures
  if (c.touched) return;
  for (size_t i = 0; i < capacity; ++i) c.src.get()[i] = static_cast<std::byte>(i * 31 + 7);
  std::memset(c.dst.get(), 0, capacity);
  c.touched = true;
}

// One thread's part of one size: warm-up, then the repetitions, each begun together with
// the other copiers, then the check of its destination.
void copy_size(Copier& c, size_t capacity, size_t bytes, int iters, int warmup, int reps,
               std::barrier<>& start) {
  pin_and_touch(c, capacity);
  for (int i = 0; i < warmup; ++i) copy_once(c, bytes);
  c.per_copy_us.assign(static_cast<size_t>(reps), 0.0);
  for (int r = 0; r < reps; ++r) {
    start.arrive_and_wait();
    Stopwatch watch;
    for (int i = 0; i < iters; ++i) copy_once(c, bytes);
    c.per_copy_us[static_cast<size_t>(r)] = watch.elapsed_us() / iters;
  }
  c.wrong = differing_bytes(c, bytes);
}

// Runs every copier's part of one size on its own thread; false when a thread cannot start.
bool run_size(std::vector<Copier>& copiers, size_t capacity, size_t bytes, int iters,
              int warmup, int reps) {
  std::barrier<> start(static_cast<std::ptrdiff_t>(copiers.size()));
  std::vector<std::jthread> threads;
  try {
    threads.reserve(copiers.size());
    for (Copier& c : copiers)
      threads.emplace_back([&, bytes] { copy_size(c, capacity, bytes, iters, warmup, reps, start); });
  } catch (const std::exception&) {  // std::system_error: no thread to be had
    // The started ones wait at `start` for the rest: none may be left there.
    for (size_t i = threads.size(); i < copiers.size(); ++i) start.arrive_and_drop();
    return false;
  }
  return true;  // the jthreads join here
}

Row size_row(const std::vector<Copier>& copiers, size_t bytes, int iters, int reps,
             int64_t wrong) {
  std::vector<double> time_us, gbps;
  for (int r = 0; r < reps; ++r) {
    double sum = 0;
    for (const Copier& c : copiers) sum += c.per_copy_us[static_cast<size_t>(r)];
    time_us.push_back(sum / static_cast<double>(copiers.size()));
    gbps.push_back(static_cast<double>(bytes) / (time_us.back() * 1e3));
  }
  Summary per_copy = summarize(gbps), all = per_copy;
  for (double* v : {&all.median, &all.min, &all.max}) *v *= static_cast<double>(copiers.size());
  return {{"size", static_cast<int64_t>(bytes)}, {"copies", static_cast<int64_t>(copiers.size())},
          {"iters", static_cast<int64_t>(iters)}, {"time_us", summarize(time_us), 3},
          {"GBps", per_copy, 2}, {"all_GBps", all, 2}, {"wrong", wrong}};
}

std::string cpu_list(const std::vector<Copier>& copiers) {
  std::string text;
  for (const Copier& c : copiers) text += (text.empty() ? "" : ",") + std::to_string(c.cpu);
  return text;
}

void describe_run(Report* report, const MemcpyOptions& o, const std::vector<Copier>& copiers) {
  report->add_meta("zcx_version", zcx_version_string());
  report->add_meta("copies", static_cast<int64_t>(copiers.size()));
  report->add_meta("cpus", cpu_list(copiers));
  report->add_meta("reps", static_cast<int64_t>(o.sweep.reps));
  report->add_meta("statistics", "each copier (a thread pinned to its CPU) memcpy's its own "
                   "source into its own destination, all at the same time; time_us: per "
                   "repetition, elapsed / iters, averaged over the copiers; GBps = size / "
                   "time_us (1e9 B/s), one copier's rate; all_GBps = GBps * copies; median, "
                   "min, max over reps; wrong: destination bytes that differ from the source");
}

// The copiers, each with buffers of `capacity` bytes; "" or why they cannot be had.
std::string make_copiers(const MemcpyOptions& o, size_t capacity, std::vector<Copier>* out) {
  std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) return std::string("sched_getaffinity: ") + std::strerror(errno);
  const size_t n = o.copies > 0 ? static_cast<size_t>(o.copies) : cpus.size();
  // Refused up front: with overcommit the allocation could succeed and the first touch
  // then bring the out-of-memory killer.
  const size_t host = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) *
                      static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (capacity > host / 2 / n)
    return "2 x " + std::to_string(capacity) + " bytes for each of " + std::to_string(n) +
           " copiers exceed this host's memory (" + std::to_string(host) +
           " bytes); lower -e or --copies";
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    Copier& c = (*out)[i];
    c.cpu = cpus[i % cpus.size()];
    void* src = nullptr;
    void* dst = nullptr;
    if (posix_memalign(&src, kAlignment, capacity) == 0) c.src.reset(static_cast<std::byte*>(src));
    if (posix_memalign(&dst, kAlignment, capacity) == 0) c.dst.reset(static_cast<std::byte*>(dst));
    if (!c.src || !c.dst)
      return "cannot allocate 2 x " + std::to_string(capacity) + " bytes for each of " +
             std::to_string(n) + " copiers (lower -e or --copies)";
  }
  return "";
}

std::string run(const MemcpyOptions& o, Report* report) {
  std::vector<Copier> copiers;
  std::string error = make_copiers(o, o.sweep.max_bytes, &copiers);
  if (!error.empty()) return error;
  describe_run(report, o, copiers);
  bool first = true;
  int64_t wrong = 0;
  for (size_t bytes : sweep_sizes(o.sweep)) {
    const int iters = iterations_for(o.sweep, bytes), warmup = warmup_for(o.sweep, bytes);
    if (!run_size(copiers, o.sweep.max_bytes, bytes, iters, warmup, o.sweep.reps))
      return "cannot start " + std::to_string(copiers.size()) + " copying threads";
    int64_t size_wrong = 0;
    for (const Copier& c : copiers) size_wrong += c.wrong;
    wrong += size_wrong;
    Row row = size_row(copiers, bytes, iters, o.sweep.reps, size_wrong);
    if (first) report->print_header(stdout, row);
    first = false;
    report->print_row(stdout, row);
    report->add_row(std::move(row));
  }
  return wrong == 0 ? "" : std::to_string(wrong) + " copied bytes differ from their source";
}

}  // namespace

void memcpy_usage(FILE* to) {
  std::fprintf(to,
      "usage: zcx-perf memcpy [options]        (one process: no launcher)\n"
      "\n"
      "How fast this host copies memory when all of its CPUs copy at once: the limit the\n"
      "figures of ranks on one host are read against. Each copier, a thread pinned to its\n"
      "CPU, memcpy's its own source into its own destination. For each size:\n"
      "  time_us     one copy, per repetition elapsed / n, averaged over the copiers\n"
      "  GBps        one copier's rate, size / time_us (GB/s = 1e9 bytes/s)\n"
      "  all_GBps    all copiers together (GBps * copies)\n"
      "  wrong       destination bytes that differ from the source, checked after the copies\n"
      "Median, min and max over --reps repetitions of n copies, after w warm-up copies.\n"
      "\n"
      "  --copies C              copiers (default: one per CPU this process may run on;\n"
      "                          more than that are placed round-robin on those CPUs)\n"
      "%s"
      "\n"
      "Example: zcx-perf memcpy -b 8 -e 16M -f 8 --reps 3\n",
      sweep_options_help());
}

int memcpy_main(std::vector<std::string> args) {
  for (const std::string& a : args)
    if (a == "-h" || a == "--help") {
      memcpy_usage(stdout);
      return 0;
    }
  MemcpyOptions o;
  std::string error = parse_memcpy_options(args, &o);
  if (!error.empty()) {
    std::fprintf(stderr, "zcx-perf memcpy: %s (see zcx-perf memcpy --help)\n", error.c_str());
    return 2;
  }
  Report report("zcx-perf", "memcpy");
  error = run(o, &report);
  std::string json_error;  // the rows measured are written even when a copy was wrong
  if (!o.sweep.json_path.empty() && !report.write_json(o.sweep.json_path, &json_error) &&
      error.empty())
    error = json_error;
  if (!error.empty()) {
    std::fprintf(stderr, "zcx-perf memcpy: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace zcx::perf
