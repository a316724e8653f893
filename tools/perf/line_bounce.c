/* line_bounce: the CPU-to-CPU floor of this host, with no library in the way. Two processes,
 * pinned to CPUs A and B (default 0 and 1), bounce one cache line; prints the one-way time in
 * nanoseconds. On a VM this moves with where the hypervisor places the two vCPUs (on this
 * project's 2-CPU VM: about 60 ns when they share a cache, 250-350 ns when they do not, once
 * 23 ns), and transfers between the ranks' caches move with it, so the compare scripts print
 * it before and after each measurement.
 * usage: line_bounce [iterations] [cpu A] [cpu B]   (cc -O2 -o line_bounce line_bounce.c) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return sched_setaffinity(0, sizeof s, &s);
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int cpu_a = argc > 2 ? atoi(argv[2]) : 0, cpu_b = argc > 3 ? atoi(argv[3]) : 1;
  char* m = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (n <= 0 || m == MAP_FAILED) {
    fprintf(stderr, "line_bounce: bad iteration count or no shared page\n");
    return 2;
  }
  /* Two lines, 256 bytes apart: the adjacent-line prefetcher cannot couple them. */
  _Atomic long *ping = (void*)m, *pong = (void*)(m + 256);
  pid_t child = fork();
  if (child < 0) return 2;
  if (child == 0) {
    if (pin(cpu_b) != 0) {
      atomic_store(pong, -1); /* the parent stops waiting */
      _exit(3);
    }
    for (long i = 1; i <= n; i++) {
      while (atomic_load(ping) != i) {}
      atomic_store(pong, i);
    }
    _exit(0);
  }
  if (pin(cpu_a) != 0) fprintf(stderr, "line_bounce: cannot pin to CPU %d\n", cpu_a);
  double t0 = now_ns();
  for (long i = 1; i <= n; i++) {
    atomic_store(ping, i);
    long seen;
    while ((seen = atomic_load(pong)) != i && seen >= 0) {}
    if (seen < 0) break;
  }
  double t1 = now_ns();
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "line_bounce: the partner on CPU %d failed (cannot pin?)\n", cpu_b);
    return 2;
  }
  printf("%.1f\n", (t1 - t0) / n / 2);
  return 0;
}
