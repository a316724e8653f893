/* mpi_pingpong: the MPI side of tools/perf/compare.sh. Measures what zcx-perf p2p measures,
 * the same way, between ranks 0 and 1:
 *   latency   one-way = ping-pong round trip / 2 (MPI_Irecv + MPI_Send), microseconds
 *   bandwidth rank 0 -> rank 1, GB/s = 1e9 B/s, `window` MPI_Isend/MPI_Irecv in flight
 *             (osu_bw style batches), timed on rank 0 until rank 1's 1-byte acknowledgement
 * Sizes -b..-e times -f, -n iterations per repetition (default: enough for ~1 GiB, 20..1000),
 * -w warm-up (default n/10, at least 2), --reps repetitions: median, min, max.
 * Build: mpicc -O2 -o mpi_pingpong mpi_pingpong.c
 * Run:   mpirun -np 2 ./mpi_pingpong -b 8 -e 64M */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  size_t min_bytes, max_bytes, factor;
  int iters, warmup, reps, window; /* iters/warmup/window 0 or -1: chosen per size */
  int lat, bw;                     /* -t lat|bw|both */
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
  o->iters = 0; o->warmup = -1; o->reps = 5; o->window = 0; o->lat = o->bw = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* n = argv[i]; const char* v = argv[i + 1];
    if (!strcmp(n, "-b")) o->min_bytes = parse_size(v);
    else if (!strcmp(n, "-e")) o->max_bytes = parse_size(v);
    else if (!strcmp(n, "-f")) o->factor = parse_size(v);
    else if (!strcmp(n, "-n")) o->iters = atoi(v);
    else if (!strcmp(n, "-w")) o->warmup = atoi(v);
    else if (!strcmp(n, "--reps")) o->reps = atoi(v);
    else if (!strcmp(n, "--window")) o->window = atoi(v);
    else if (!strcmp(n, "-t") && !strcmp(v, "lat")) o->bw = 0;
    else if (!strcmp(n, "-t") && !strcmp(v, "bw")) o->lat = 0;
    else if (!strcmp(n, "-t") && !strcmp(v, "both")) o->lat = o->bw = 1;
    else return -1;
  }
  if (argc % 2 == 0) return -1;
  return o->min_bytes >= 1 && o->min_bytes <= o->max_bytes && o->factor >= 2 && o->reps >= 1
             ? 0 : -1;
}

static int iters_for(const options_t* o, size_t bytes) {
  if (o->iters > 0) return o->iters;
  size_t n = ((size_t)1 << 30) / bytes;
  return n < 20 ? 20 : n > 1000 ? 1000 : (int)n;
}

static int warmup_for(const options_t* o, size_t bytes) {
  if (o->warmup >= 0) return o->warmup;
  int w = iters_for(o, bytes) / 10;
  return w < 2 ? 2 : w;
}

static int window_for(const options_t* o, size_t bytes) {
  if (o->window > 0) return o->window;
  return bytes < 65536 ? 64 : 16;
}

static double latency_rep(int rank, char* sbuf, char* rbuf, size_t bytes, int iters) {
  int peer = 1 - rank;
  double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    MPI_Request r;
    MPI_Irecv(rbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &r);
    if (rank == 1) MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Send(sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    if (rank == 0) MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  return (MPI_Wtime() - start) * 1e6 / iters / 2;
}

static double bandwidth_rep(int rank, char* sbuf, char* rbuf, size_t bytes, int iters,
                            int window, MPI_Request* reqs) {
  double start = MPI_Wtime();
  char ack = 0;
  for (int done = 0; done < iters;) {
    int batch = iters - done < window ? iters - done : window;
    for (int k = 0; k < batch; ++k) {
      if (rank == 0) MPI_Isend(sbuf, (int)bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[k]);
      else MPI_Irecv(rbuf, (int)bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[k]);
    }
    MPI_Waitall(batch, reqs, MPI_STATUSES_IGNORE);
    done += batch;
  }
  if (rank == 0) MPI_Recv(&ack, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else MPI_Send(&ack, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
  return (double)bytes * iters / (MPI_Wtime() - start) / 1e9;
}

static int compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void summarize(double* v, int n, double out[3]) {
  qsort(v, (size_t)n, sizeof *v, compare_double);
  out[0] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  out[1] = v[0];
  out[2] = v[n - 1];
}

static void measure(int rank, const options_t* o, char* sbuf, char* rbuf, size_t bytes,
                    MPI_Request* reqs, double* samples) {
  int iters = iters_for(o, bytes), warm = warmup_for(o, bytes), window = window_for(o, bytes);
  double lat[3] = {-1, -1, -1}, bw[3] = {-1, -1, -1}; /* -1: not measured, printed as "-" */
  if (o->lat) {
    if (warm > 0) latency_rep(rank, sbuf, rbuf, bytes, warm);
    for (int r = 0; r < o->reps; ++r) samples[r] = latency_rep(rank, sbuf, rbuf, bytes, iters);
    summarize(samples, o->reps, lat);
  }
  if (o->bw) {
    if (warm > 0) bandwidth_rep(rank, sbuf, rbuf, bytes, warm, window, reqs);
    for (int r = 0; r < o->reps; ++r)
      samples[r] = bandwidth_rep(rank, sbuf, rbuf, bytes, iters, window, reqs);
    summarize(samples, o->reps, bw);
  }
  if (rank != 0) return;
  printf(" %12zu %12d %12d", bytes, iters, o->bw ? window : 0);
  for (int k = 0; k < 3; ++k) o->lat ? printf(" %12.2f", lat[k]) : printf(" %12s", "-");
  for (int k = 0; k < 3; ++k) o->bw ? printf(" %12.3f", bw[k]) : printf(" %12s", "-");
  printf("\n");
  fflush(stdout);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  options_t o;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (nranks != 2 || parse_options(argc, argv, &o) != 0) {
    if (rank == 0)
      fprintf(stderr, "usage: mpirun -np 2 mpi_pingpong [-b SIZE] [-e SIZE] [-f F] [-n N] "
                      "[-w N] [--reps R] [--window W] [-t lat|bw|both]\n");
    MPI_Finalize();
    return 2;
  }
  char* sbuf = malloc(o.max_bytes);
  char* rbuf = malloc(o.max_bytes);
  MPI_Request* reqs = malloc(sizeof(MPI_Request) * 1024);
  double* samples = malloc(sizeof(double) * (size_t)o.reps);
  if (!sbuf || !rbuf || !reqs || !samples || window_for(&o, 1) > 1024) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(sbuf, 1, o.max_bytes);
  memset(rbuf, 0, o.max_bytes);
  if (rank == 0)
    printf("# mpi_pingpong (MPI)\n#%13s %12s %12s %12s %12s %12s %12s %12s %12s\n", "size",
           "iters", "window", "lat_us_med", "lat_us_min", "lat_us_max", "bw_GBps_med",
           "bw_GBps_min", "bw_GBps_max");
  for (size_t s = o.min_bytes; s <= o.max_bytes; s *= o.factor) {
    measure(rank, &o, sbuf, rbuf, s, reqs, samples);
    if (s > o.max_bytes / o.factor) break;
  }
  free(sbuf); free(rbuf); free(reqs); free(samples);
  MPI_Finalize();
  return 0;
}
