// gloo_allreduce: the Gloo side of tools/perf/coll_compare.sh. A float32 sum allreduce with
// Gloo's ring algorithm (gloo::allreduce, AllreduceOptions::Algorithm::RING, the algorithm
// PyTorch's ProcessGroupGloo runs for dense CPU tensors) over Gloo's TCP transport, measured
// as nccl-tests, `zcx-perf coll` and mpi_allreduce.c measure:
//   per size: -w warm-up iterations, then --reps repetitions of -n iterations each;
//   one repetition's time per iteration = its elapsed time / n, averaged over the ranks
//   (nccl-tests' -a 1 default and zcx-perf coll's; -a 3: the maximum over the ranks);
//   algbw = size / time (GB/s = 1e9 B/s), busbw = algbw * 2(n-1)/n (n = ranks);
//   printed: median, min and max over the repetitions.
// -n and -w default to nccl-tests' 20 and 5; --reps to 5.
// Out-of-place by default, --in-place for one buffer. Before a size is timed, one allreduce
// of known values is checked element by element ("wrong": differing elements over ranks).
//
// Each rank is a process; rank and size come from --rank/--size or from zcx-run's ZCX_RANK
// and ZCX_NRANKS. Rendezvous goes through a gloo::rendezvous::FileStore in --store DIR
// (a directory every rank can write), keys prefixed with --prefix (default: ZCX_RUN_JOB).
//
// Build: g++ -O2 -std=c++17 -o gloo_allreduce gloo_allreduce.cc -lgloo -lpthread
// Run:   zcx-run -np 2 -- ./gloo_allreduce --store /tmp/gloo-store -b 8 -e 256M
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Options {
  size_t min_bytes = 8, max_bytes = size_t{64} << 20, factor = 2;
  int iters = 20, warmup = 5, reps = 5;
  int rank_time = 1;  // -a: 1 = mean over ranks, 3 = max over ranks
  bool in_place = false;
  int rank = -1, size = -1;
  std::string store, prefix, iface = "lo";
  int timeout_s = 120;
};

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

size_t parse_size(const char* text) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  else if (*end == 'M' || *end == 'm') v <<= 20;
  else if (*end == 'G' || *end == 'g') v <<= 30;
  return static_cast<size_t>(v);
}

bool apply(Options& o, const std::string& n, const char* v) {
  if (n == "-b") o.min_bytes = parse_size(v);
  else if (n == "-e") o.max_bytes = parse_size(v);
  else if (n == "-f") o.factor = parse_size(v);
  else if (n == "-n") o.iters = std::atoi(v);
  else if (n == "-w") o.warmup = std::atoi(v);
  else if (n == "--reps") o.reps = std::atoi(v);
  else if (n == "-a") o.rank_time = std::atoi(v);
  else if (n == "--rank") o.rank = std::atoi(v);
  else if (n == "--size") o.size = std::atoi(v);
  else if (n == "--store") o.store = v;
  else if (n == "--prefix") o.prefix = v;
  else if (n == "--iface") o.iface = v;
  else if (n == "--timeout") o.timeout_s = std::atoi(v);
  else return false;
  return true;
}

bool parse_options(int argc, char** argv, Options& o) {
  o.rank = std::atoi(env_or("ZCX_RANK", "-1"));
  o.size = std::atoi(env_or("ZCX_NRANKS", "-1"));
  o.prefix = env_or("ZCX_RUN_JOB", "gloo_allreduce");
  for (int i = 1; i < argc; ++i) {
    std::string n = argv[i];
    if (n == "--in-place") { o.in_place = true; continue; }
    if (i + 1 >= argc || !apply(o, n, argv[++i])) return false;
  }
  return o.size >= 2 && o.rank >= 0 && o.rank < o.size && !o.store.empty() &&
         o.min_bytes >= sizeof(float) && o.min_bytes <= o.max_bytes && o.factor >= 2 &&
         o.reps >= 1 && o.iters >= 1 && o.warmup >= 0 && o.timeout_s > 0 &&
         (o.rank_time == 1 || o.rank_time == 3);
}

using Clock = std::chrono::steady_clock;

// One rank's view: its context, buffers and the allreduce options for the current size.
struct Bench {
  std::shared_ptr<gloo::Context> ctx;
  std::vector<float> send, recv;
  bool in_place = false;
  int rank_time = 1;

  float* out() { return in_place ? send.data() : recv.data(); }

  std::unique_ptr<gloo::AllreduceOptions> float_sum(size_t count) {
    auto opts = std::make_unique<gloo::AllreduceOptions>(ctx);
    opts->setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    if (!in_place) opts->setInput(send.data(), count);
    opts->setOutput(out(), count);
    opts->setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    return opts;
  }

  template <typename T>
  T reduce_scalar(T value, void (*fn)(void*, const void*, const void*, size_t)) {
    gloo::AllreduceOptions opts(ctx);
    opts.setOutput(&value, 1);
    opts.setReduceFunction(fn);
    opts.setTag(1);  // apart from the measured allreduce's tag 0
    gloo::allreduce(opts);
    return value;
  }

  void barrier() {
    gloo::BarrierOptions opts(ctx);
    opts.setTag(2);
    gloo::barrier(opts);
  }
};

// Rank r contributes r + 1 + (i % 7) at element i: small integers, so the float sum is
// exact and every element of the result is predictable.
void fill(std::vector<float>& buf, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
}

double check(Bench& b, size_t count) {
  fill(b.send, count, b.ctx->rank);
  gloo::allreduce(*b.float_sum(count));
  const int n = b.ctx->size;
  double wrong = 0;
  const float* out = b.out();
  for (size_t i = 0; i < count; ++i)
    wrong += out[i] != static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
  return b.reduce_scalar(wrong, &gloo::sum<double>);
}

// One repetition: microseconds per iteration, the mean (-a 1) or maximum (-a 3) over ranks.
double time_rep(Bench& b, const gloo::AllreduceOptions& opts, int iters) {
  b.barrier();
  auto start = Clock::now();
  for (int i = 0; i < iters; ++i) gloo::allreduce(opts);
  double local = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
  if (b.rank_time == 3) return b.reduce_scalar(local, &gloo::max<double>);
  return b.reduce_scalar(local, &gloo::sum<double>) / b.ctx->size;
}

// median, min, max (sorts v).
void summarize(std::vector<double>& v, double out[3]) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  out[0] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  out[1] = v.front();
  out[2] = v.back();
}

void print_row(size_t count, int iters, const double t[3], int nranks, double wrong) {
  // The fastest repetition has the highest bandwidth: min time -> max bw.
  double bytes = static_cast<double>(count * sizeof(float));
  double factor = 2.0 * (nranks - 1) / nranks;
  double alg[3] = {bytes / t[0] / 1e3, bytes / t[2] / 1e3, bytes / t[1] / 1e3};
  std::printf(" %12zu %12zu %8d %12.3f %12.3f %12.3f", count * sizeof(float), count, iters,
              t[0], t[1], t[2]);
  for (double a : alg) std::printf(" %10.3f", a);
  for (double a : alg) std::printf(" %10.3f", a * factor);
  std::printf(" %8.0f\n", wrong);
  std::fflush(stdout);
}

void measure(Bench& b, const Options& o, size_t bytes) {
  size_t count = bytes / sizeof(float);
  int iters = o.iters, warm = o.warmup;
  double wrong = check(b, count);
  auto opts = b.float_sum(count);
  if (warm > 0) time_rep(b, *opts, warm);
  std::vector<double> samples;
  for (int r = 0; r < o.reps; ++r) samples.push_back(time_rep(b, *opts, iters));
  double t[3];
  summarize(samples, t);
  if (b.ctx->rank == 0) print_row(count, iters, t, b.ctx->size, wrong);
}

std::shared_ptr<gloo::Context> connect(const Options& o) {
  gloo::transport::tcp::attr attr;
  attr.iface = o.iface;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore files(o.store);
  gloo::rendezvous::PrefixStore store(o.prefix, files);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
  ctx->setTimeout(std::chrono::seconds(o.timeout_s));
  ctx->connectFullMesh(store, dev);
  return ctx;
}

void run(const Options& o) {
  Bench b;
  b.ctx = connect(o);
  b.in_place = o.in_place;
  b.rank_time = o.rank_time;
  size_t max_count = o.max_bytes / sizeof(float);
  b.send.assign(max_count, 1.0f);
  if (!o.in_place) b.recv.assign(max_count, 0.0f);
  if (o.rank == 0)
    std::printf("# gloo_allreduce (Gloo ring, tcp on %s), float32 sum, %d ranks, %s, reps %d, "
                "time: %s over ranks\n"
                "#%11s %12s %8s %12s %12s %12s %10s %10s %10s %10s %10s %10s %8s\n",
                o.iface.c_str(), o.size, o.in_place ? "in-place" : "out-of-place", o.reps,
                o.rank_time == 3 ? "max" : "mean",
                "size", "count", "iters", "time_us_med", "time_us_min", "time_us_max",
                "algbw_med", "algbw_min", "algbw_max", "busbw_med", "busbw_min", "busbw_max",
                "wrong");
  for (size_t s = o.min_bytes; s <= o.max_bytes; s *= o.factor) {
    measure(b, o, s);
    if (s > o.max_bytes / o.factor) break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: gloo_allreduce --store DIR [--rank R --size N] [--prefix P] "
                 "[--iface lo] [-b SIZE] [-e SIZE] [-f F] [-n N] [-w N] [--reps R] "
                 "[--in-place] [-a 1|3] [--timeout S]\n  (N >= 2; rank/size default to ZCX_RANK/"
                 "ZCX_NRANKS as set by zcx-run; SIZE >= 4 bytes)\n");
    return 2;
  }
  try {
    run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce: rank %d of %d: %s\n", o.rank, o.size, e.what());
    return 1;
  }
  return 0;
}
