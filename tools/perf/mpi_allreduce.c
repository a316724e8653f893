/* mpi_allreduce: the Open MPI side of tools/perf/coll_compare.sh. Measures a float32 sum
 * MPI_Allreduce (or, with --op, an MPI_Allgather or an MPI_Bcast from rank 0 of float32)
 * the way nccl-tests and `zcx-perf coll` do:
 *   per size: -w warm-up iterations, then --reps repetitions of -n iterations each;
 *   one repetition's time per iteration = its elapsed time / n, averaged over the ranks
 *   (nccl-tests' -a 1 default and zcx-perf coll's; -a 3: the maximum over the ranks);
 *   algbw = size / time (GB/s = 1e9 B/s), busbw = algbw * 2(n-1)/n (n = ranks; allgather
 *   (n-1)/n, its size the gathered total; broadcast 1);
 *   printed: median, min and max over the repetitions.
 * Out-of-place (sendbuf != recvbuf) by default, --in-place for MPI_IN_PLACE (a broadcast
 * is in place either way). Before a size is timed, one call of known values is checked
 * element by element ("wrong" column: elements that differ, summed over ranks).
 * Sizes -b..-e times -f (bytes, K/M/G suffixes), -n iterations per repetition and -w warm-up
 * iterations (nccl-tests' defaults, 20 and 5), --reps (default 5), -a 1|3 (see above).
 * --overlap POLL_US also measures the nonblocking form's overlap, as `zcx-perf coll
 * --overlap` does (the OSU method): pure = post (MPI_Iallreduce, MPI_Iallgather, MPI_Ibcast)
 * then MPI_Wait; total = post, compute for the median pure time with an MPI_Test every
 * POLL_US of it (0: none; the tests' own time is not computation), MPI_Wait; overlap =
 * 100 * (1 - (total - compute) / pure) per repetition, within 0..100. Five more columns:
 * pure_us_med, total_us_med, overlap median, min and max (%). Out-of-place only.
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 * Run:   mpirun -np 2 ./mpi_allreduce -b 8 -e 256M
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OP_ALLREDUCE, OP_ALLGATHER, OP_BROADCAST } coll_op_t;
static const char* const op_names[] = {"allreduce", "allgather", "broadcast"};

typedef struct {
  coll_op_t op;
  size_t min_bytes, max_bytes, factor;
  int iters, warmup, reps, in_place;
  int rank_time;                     /* -a: 1 = mean over ranks, 3 = max over ranks */
  int overlap_poll_us;               /* --overlap: -1 = not measured */
} options_t;

static size_t parse_size(const char* text) {
  char* end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  else if (*end == 'M' || *end == 'm') v <<= 20;
  else if (*end == 'G' || *end == 'g') v <<= 30;
  return (size_t)v;
}

static int parse_options(int argc, char** argv, options_t* o) {
  o->min_bytes = 8; o->max_bytes = (size_t)64 << 20; o->factor = 2;
  o->iters = 20; o->warmup = 5; o->reps = 5; o->in_place = 0;
  o->rank_time = 1;
  o->overlap_poll_us = -1;
  o->op = OP_ALLREDUCE;
  for (int i = 1; i < argc; ++i) {
    const char* n = argv[i];
    if (!strcmp(n, "--in-place")) { o->in_place = 1; continue; }
    if (i + 1 >= argc) return -1;
    const char* v = argv[++i];
    if (!strcmp(n, "-b")) o->min_bytes = parse_size(v);
    else if (!strcmp(n, "-e")) o->max_bytes = parse_size(v);
    else if (!strcmp(n, "-f")) o->factor = parse_size(v);
    else if (!strcmp(n, "-n")) o->iters = atoi(v);
    else if (!strcmp(n, "-w")) o->warmup = atoi(v);
    else if (!strcmp(n, "--reps")) o->reps = atoi(v);
    else if (!strcmp(n, "-a")) o->rank_time = atoi(v);
    else if (!strcmp(n, "--overlap")) o->overlap_poll_us = atoi(v);
    else if (!strcmp(n, "--op") && !strcmp(v, "allgather")) o->op = OP_ALLGATHER;
    else if (!strcmp(n, "--op") && !strcmp(v, "broadcast")) o->op = OP_BROADCAST;
    else if (!strcmp(n, "--op") && !strcmp(v, "allreduce")) o->op = OP_ALLREDUCE;
    else return -1;
  }
  /* MPI counts are int: a size's element count must fit. */
  int sizes_ok = o->min_bytes >= sizeof(float) && o->min_bytes <= o->max_bytes &&
                 o->max_bytes / sizeof(float) <= 0x7fffffff && o->factor >= 2;
  int counts_ok = o->reps >= 1 && o->iters >= 1 && o->warmup >= 0;
  int overlap_ok = o->overlap_poll_us < 0 || !o->in_place;
  return sizes_ok && counts_ok && overlap_ok && (o->rank_time == 1 || o->rank_time == 3) ? 0 : -1;
}

/* Rank r contributes r + 1 + (i % 7) at element i: small integers, so the float sum is
 * exact and every element of the result is predictable. */
static void fill(float* buf, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) buf[i] = (float)(rank + 1 + (int)(i % 7));
}

/* One call on `count` floats (allgather: the gathered total, count / nranks from each). */
static void call(const options_t* o, float* sbuf, float* rbuf, size_t count, int nranks) {
  const int per = (int)(count / (size_t)nranks);
  switch (o->op) {
    case OP_ALLGATHER:
      if (o->in_place)
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, per, MPI_FLOAT, MPI_COMM_WORLD);
      else
        MPI_Allgather(sbuf, per, MPI_FLOAT, rbuf, per, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case OP_BROADCAST: MPI_Bcast(sbuf, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    default:
      if (o->in_place) MPI_Allreduce(MPI_IN_PLACE, sbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else MPI_Allreduce(sbuf, rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
}

/* The nonblocking form of call() (out of place). */
static void post(const options_t* o, float* sbuf, float* rbuf, size_t count, int nranks,
                 MPI_Request* req) {
  const int per = (int)(count / (size_t)nranks);
  switch (o->op) {
    case OP_ALLGATHER:
      MPI_Iallgather(sbuf, per, MPI_FLOAT, rbuf, per, MPI_FLOAT, MPI_COMM_WORLD, req); break;
    case OP_BROADCAST: MPI_Ibcast(sbuf, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD, req); break;
    default: MPI_Iallreduce(sbuf, rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
  }
}

/* `us` microseconds of busy computation, testing the request every poll_us of it; the
 * tests' own time is not computation (as in zcx-perf coll --overlap). */
static void compute_polling(double us, int poll_us, MPI_Request* req) {
  const double start = MPI_Wtime();
  double next_poll = poll_us > 0 ? poll_us : us + 1, in_tests = 0;
  volatile unsigned long work = 0;
  for (double worked = 0; worked < us; worked = (MPI_Wtime() - start) * 1e6 - in_tests) {
    for (int i = 0; i < 64; ++i) work = work + 1;
    if (worked < next_poll) continue;
    const double before = MPI_Wtime();
    int done = 0;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    in_tests += (MPI_Wtime() - before) * 1e6;
    next_poll += poll_us;
  }
}

/* Where a call leaves its result, and what element i of it must be. */
static const float* result(const options_t* o, const float* sbuf, const float* rbuf) {
  return o->op == OP_BROADCAST || (o->op == OP_ALLREDUCE && o->in_place) ? sbuf : rbuf;
}

static float expected(const options_t* o, size_t i, size_t count, int nranks) {
  const size_t per = count / (size_t)nranks;
  switch (o->op) {
    case OP_ALLGATHER: return (float)((int)(i / per) + 1 + (int)(i % per % 7));
    case OP_BROADCAST: return (float)(1 + (int)(i % 7));
    default: return (float)(nranks * (nranks + 1) / 2 + nranks * (int)(i % 7));
  }
}

static long long check(const options_t* o, float* sbuf, float* rbuf, size_t count, int rank,
                       int nranks) {
  const size_t per = count / (size_t)nranks;
  if (o->op == OP_ALLGATHER) fill(o->in_place ? rbuf + per * (size_t)rank : sbuf, per, rank);
  else if (o->op == OP_BROADCAST) fill(sbuf, count, rank == 0 ? 0 : 100);
  else fill(sbuf, count, rank);
  call(o, sbuf, rbuf, count, nranks);
  const float* out = result(o, sbuf, rbuf);
  long long wrong = 0, total = 0;
  for (size_t i = 0; i < count; ++i) wrong += out[i] != expected(o, i, count, nranks);
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

/* One repetition: microseconds per iteration, the mean (-a 1) or maximum (-a 3) over ranks. */
static double time_rep(const options_t* o, float* sbuf, float* rbuf, size_t count, int iters) {
  int nranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) call(o, sbuf, rbuf, count, nranks);
  double local = (MPI_Wtime() - start) * 1e6 / iters, all = 0;
  if (o->rank_time == 3) {
    MPI_Allreduce(&local, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return all;
  }
  MPI_Allreduce(&local, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all / nranks;
}

/* One repetition of posted calls: each computed over for compute_us (< 0: waited for at
 * once); microseconds per iteration, averaged (or maximized) over the ranks as time_rep. */
static double overlap_rep(const options_t* o, float* sbuf, float* rbuf, size_t count, int iters,
                          double compute_us) {
  int nranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    MPI_Request req;
    post(o, sbuf, rbuf, count, nranks, &req);
    if (compute_us >= 0) compute_polling(compute_us, o->overlap_poll_us, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  double local = (MPI_Wtime() - start) * 1e6 / iters, all = 0;
  MPI_Allreduce(&local, &all, 1, MPI_DOUBLE, o->rank_time == 3 ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
  return o->rank_time == 3 ? all : all / nranks;
}

static int compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* out = median, min, max of v[0..n) (sorts v). */
static void summarize(double* v, int n, double out[3]) {
  qsort(v, (size_t)n, sizeof *v, compare_double);
  out[0] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  out[1] = v[0];
  out[2] = v[n - 1];
}

/* Elements of one call of `bytes` (allgather: whole blocks, as zcx-perf). */
static size_t count_of(const options_t* o, size_t bytes, int nranks) {
  size_t count = bytes / sizeof(float);
  return o->op == OP_ALLGATHER ? count - count % (size_t)nranks : count;
}

static void measure(const options_t* o, float* sbuf, float* rbuf, size_t count, int rank,
                    int nranks, double* samples) {
  int iters = o->iters, warm = o->warmup;
  long long wrong = check(o, sbuf, rbuf, count, rank, nranks);
  if (warm > 0) time_rep(o, sbuf, rbuf, count, warm);
  for (int r = 0; r < o->reps; ++r) samples[r] = time_rep(o, sbuf, rbuf, count, iters);
  double t[3];
  summarize(samples, o->reps, t);
  if (rank != 0) return;
  /* The fastest repetition has the highest bandwidth: min time -> max bw. */
  double bytes_d = (double)count * sizeof(float);
  double factor = o->op == OP_BROADCAST ? 1.0
                  : o->op == OP_ALLGATHER ? (double)(nranks - 1) / nranks
                                          : 2.0 * (nranks - 1) / nranks;
  double alg[3] = {bytes_d / t[0] / 1e3, bytes_d / t[2] / 1e3, bytes_d / t[1] / 1e3};
  printf(" %12zu %12zu %8d %12.3f %12.3f %12.3f", count * sizeof(float), count, iters, t[0], t[1], t[2]);
  for (int k = 0; k < 3; ++k) printf(" %10.3f", alg[k]);
  for (int k = 0; k < 3; ++k) printf(" %10.3f", alg[k] * factor);
  printf(" %8lld", wrong);
}

/* --overlap: pure and total times, and the overlap, of the posted form; printed by rank 0. */
static void measure_overlap(const options_t* o, float* sbuf, float* rbuf, size_t count,
                            int rank, double* samples) {
  double pure[3], total[3], share[3];
  if (o->warmup > 0) overlap_rep(o, sbuf, rbuf, count, o->warmup, -1);
  for (int r = 0; r < o->reps; ++r) samples[r] = overlap_rep(o, sbuf, rbuf, count, o->iters, -1);
  summarize(samples, o->reps, pure);
  for (int r = 0; r < o->reps; ++r)
    samples[r] = overlap_rep(o, sbuf, rbuf, count, o->iters, pure[0]);
  summarize(samples, o->reps, total);
  for (int r = 0; r < o->reps; ++r) {
    double hidden = 1.0 - (samples[r] - pure[0]) / pure[0];
    samples[r] = 100.0 * (hidden < 0 ? 0 : hidden > 1 ? 1 : hidden);
  }
  summarize(samples, o->reps, share);
  if (rank == 0)
    printf(" %12.3f %12.3f %6.1f %6.1f %6.1f", pure[0], total[0], share[0], share[1], share[2]);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  options_t o;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (nranks < 2 || parse_options(argc, argv, &o) != 0) {
    if (rank == 0)
      fprintf(stderr, "usage: mpirun -np N mpi_allreduce [-b SIZE] [-e SIZE] [-f F] [-n N] "
                      "[-w N] [--reps R] [--in-place] [-a 1|3] [--op allreduce|allgather|broadcast]\n"
                      "       [--overlap POLL_US]   (N >= 2, SIZE >= 4 bytes; --overlap "
                      "without --in-place)\n");
    MPI_Finalize();
    return 2;
  }
  size_t max_count = o.max_bytes / sizeof(float);
  float* sbuf = malloc(max_count * sizeof(float));
  float* rbuf = malloc(max_count * sizeof(float));
  double* samples = malloc(sizeof(double) * (size_t)o.reps);
  if (!sbuf || !rbuf || !samples) {
    fprintf(stderr, "mpi_allreduce: rank %d: out of memory for %zu-byte buffers\n", rank, o.max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(rbuf, 0, max_count * sizeof(float));
  if (rank == 0)
    printf("# mpi_allreduce (MPI), %s float32%s, %d ranks, %s, reps %d, time: %s over ranks\n"
           "#%11s %12s %8s %12s %12s %12s %10s %10s %10s %10s %10s %10s %8s\n",
           op_names[o.op], o.op == OP_ALLREDUCE ? " sum" : "", nranks,
           o.in_place ? "in-place" : "out-of-place", o.reps,
           o.rank_time == 3 ? "max" : "mean", "size", "count", "iters",
           "time_us_med", "time_us_min", "time_us_max", "algbw_med", "algbw_min", "algbw_max",
           "busbw_med", "busbw_min", "busbw_max", "wrong");
  if (rank == 0 && o.overlap_poll_us >= 0)
    printf("# overlap: MPI_Test every %d us of the computation%s; columns after wrong: "
           "pure_us_med total_us_med overlap_med overlap_min overlap_max (%%)\n",
           o.overlap_poll_us, o.overlap_poll_us == 0 ? " (never)" : "");
  for (size_t s = o.min_bytes; s <= o.max_bytes; s *= o.factor) {
    const size_t count = count_of(&o, s, nranks);
    measure(&o, sbuf, rbuf, count, rank, nranks, samples);
    if (o.overlap_poll_us >= 0) measure_overlap(&o, sbuf, rbuf, count, rank, samples);
    if (rank == 0) printf("\n");
    fflush(stdout);
    if (s > o.max_bytes / o.factor) break;
  }
  free(sbuf); free(rbuf); free(samples);
  MPI_Finalize();
  return 0;
}
