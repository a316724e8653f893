/* MPI peer of zcx-shm-bench: the same two measurements with the same method.
 *   lat: ping-pong, one-way latency = round trip / 2 (average)
 *   bw:  window of W back-to-back MPI_Isend, then a 1-byte ack (osu_bw style), GB/s = 1e9 B/s
 * Usage: mpirun -np 2 shm-mpi-pingpong -t lat|bw [-s size]... [-n iters] [-w window]
 * Build: mpicc -O2 -o shm-mpi-pingpong shm_mpi_pingpong.c (tools/perf/shm_compare.sh does). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long default_iters(int lat, size_t n, long forced) {
  if (forced > 0) return forced;
  if (lat) return n <= 65536 ? 200000 : 2000;
  return n <= 65536 ? 2000 : n <= (4u << 20) ? 100 : 2;
}

static double run_lat(int rank, char* buf, size_t n, long iters) {
  long warm = iters / 10 + 10;
  double t0 = 0;
  for (long i = 0; i < warm + iters; ++i) {
    if (i == warm) t0 = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(buf, (int)n, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, (int)n, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, (int)n, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, (int)n, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
  }
  return (MPI_Wtime() - t0) * 1e6 / (double)iters / 2;
}

static double run_bw(int rank, char* buf, size_t n, long iters, int window) {
  long warm = iters / 10 + 2;
  MPI_Request* reqs = malloc(sizeof(MPI_Request) * (size_t)window);
  char ack = 0;
  double t0 = 0;
  for (long i = 0; i < warm + iters; ++i) {
    if (i == warm) t0 = MPI_Wtime();
    for (int w = 0; w < window; ++w) {
      if (rank == 0) MPI_Isend(buf, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, &reqs[w]);
      else MPI_Irecv(buf, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &reqs[w]);
    }
    MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
    if (rank == 0) MPI_Recv(&ack, 1, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else MPI_Send(&ack, 1, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
  }
  double secs = MPI_Wtime() - t0;
  free(reqs);
  return (double)n * window * (double)iters / secs / 1e9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int lat = 1, window = 64, nsizes = 0;
  long iters = 0;
  size_t sizes[32];
  int c;
  while ((c = getopt(argc, argv, "t:s:n:w:")) != -1) {
    if (c == 't') lat = strcmp(optarg, "bw") != 0;
    else if (c == 's' && nsizes < 32) sizes[nsizes++] = strtoull(optarg, NULL, 0);
    else if (c == 'n') iters = strtol(optarg, NULL, 0);
    else if (c == 'w') window = atoi(optarg);
  }
  if (nsizes == 0) {
    size_t d[] = {8, 4096, 65536, 1 << 20, 64 << 20};
    memcpy(sizes, d, sizeof(d));
    nsizes = 5;
  }
  size_t max = 1;
  for (int i = 0; i < nsizes; ++i) max = sizes[i] > max ? sizes[i] : max;
  char* buf = malloc(max);
  memset(buf, rank + 1, max);
  if (rank == 0) printf("# mpi %s\n", lat ? "lat (one-way us)" : "bw (GB/s)");
  for (int i = 0; i < nsizes; ++i) {
    long it = default_iters(lat, sizes[i], iters);
    MPI_Barrier(MPI_COMM_WORLD);
    double v = lat ? run_lat(rank, buf, sizes[i], it) : run_bw(rank, buf, sizes[i], it, window);
    if (rank == 0) printf("%-12zu %10.3f\n", sizes[i], v);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
