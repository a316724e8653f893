// zcx-shm-bench: point-to-point latency and bandwidth of the shm provider between two
// processes (fork), measured the way osu_latency/osu_bw and ucx_perftest tag_lat/tag_bw do:
//   lat: ping-pong, one-way latency = round trip / 2 (average over the iterations)
//   bw:  window of W back-to-back isends, then a 1-byte ack; GB/s = 1e9 bytes/s
// Usage: zcx-shm-bench [-t lat|bw] [-s size]... [-n iters] [-w window] [-c cpu0,cpu1]
// Ranks are pinned to two CPUs (default 0 and 1), like mpirun's default core binding.
#include "base/provider.h"
#include "common/clock.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" const zcx_provider_ops_t* zcx_provider_shm(void);

namespace {

const zcx_provider_ops_t* P = nullptr;

struct Options {
  std::string test = "lat";
  std::vector<size_t> sizes;
  long iters = 0;
  int window = 64;
  int cpu[2] = {0, 1};
};

[[noreturn]] void die(const char* what, zcx_status_t st) {
  fprintf(stderr, "zcx-shm-bench: %s failed: %s\n", what, zcx_status_string(st));
  _exit(2);
}
#define CHECK(call, what)                      \
  do {                                         \
    zcx_status_t st_ = (call);                 \
    if (st_ != ZCX_SUCCESS) die((what), st_);  \
  } while (0)

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof(set), &set);
}

void wait_req(void* req) {
  int done = 0;
  while (!done) CHECK(P->test(req, &done, nullptr), "test");
}

void* post_send(void* sc, void* buf, size_t n) {
  void* r = nullptr;
  while (r == nullptr) CHECK(P->isend(sc, buf, n, 0, nullptr, &r), "isend");
  return r;
}

void* post_recv(void* rc, void* buf, size_t n) {
  void* r = nullptr;
  int tag = 0;
  while (r == nullptr) CHECK(P->irecv(rc, 1, &buf, &n, &tag, nullptr, &r), "irecv");
  return r;
}

struct Link {
  void* sc = nullptr;
  void* rc = nullptr;
};

// rank 0 listens for 1->0 before the fork; rank 1 listens for 0->1 and pipes its handle.
Link setup(int rank, void* ctx, void* lc0, const uint8_t* h0, int pipe_fds[2]) {
  Link l;
  void* lc = lc0;
  uint8_t h1[ZCX_HANDLE_BYTES];
  if (rank == 1) {
    CHECK(P->listen(ctx, 0, h1, &lc), "listen");
    if (write(pipe_fds[1], h1, sizeof(h1)) != sizeof(h1)) _exit(3);
  } else if (read(pipe_fds[0], h1, sizeof(h1)) != sizeof(h1)) {
    _exit(3);
  }
  const uint8_t* peer_handle = rank == 0 ? h1 : h0;
  while (l.sc == nullptr || l.rc == nullptr) {
    if (l.sc == nullptr) CHECK(P->connect(ctx, 0, peer_handle, &l.sc), "connect");
    if (l.rc == nullptr) CHECK(P->accept(lc, &l.rc), "accept");
  }
  return l;
}

double run_lat(int rank, Link& l, std::vector<char>& buf, size_t n, long iters) {
  long warm = iters / 10 + 10;
  int64_t t0 = 0;
  for (long i = 0; i < warm + iters; ++i) {
    if (i == warm) t0 = zcx::now_ns();
    if (rank == 0) {
      void* r = post_recv(l.rc, buf.data(), n);
      wait_req(post_send(l.sc, buf.data(), n));
      wait_req(r);
    } else {
      wait_req(post_recv(l.rc, buf.data(), n));
      wait_req(post_send(l.sc, buf.data(), n));
    }
  }
  return static_cast<double>(zcx::now_ns() - t0) / 1e3 / static_cast<double>(iters) / 2;
}

double run_bw(int rank, Link& l, std::vector<char>& buf, size_t n, long iters, int window) {
  long warm = iters / 10 + 2;
  std::vector<void*> reqs(window);
  char ack = 0;
  int64_t t0 = 0;
  for (long i = 0; i < warm + iters; ++i) {
    if (i == warm) t0 = zcx::now_ns();
    for (int w = 0; w < window; ++w)
      reqs[w] = rank == 0 ? post_send(l.sc, buf.data(), n) : post_recv(l.rc, buf.data(), n);
    for (int w = 0; w < window; ++w) wait_req(reqs[w]);
    if (rank == 0) wait_req(post_recv(l.rc, &ack, 1));
    else wait_req(post_send(l.sc, &ack, 1));
  }
  double secs = static_cast<double>(zcx::now_ns() - t0) / 1e9;
  return static_cast<double>(n) * window * static_cast<double>(iters) / secs / 1e9;
}

long default_iters(const Options& o, size_t n) {
  if (o.iters > 0) return o.iters;
  if (o.test == "lat") return n <= 65536 ? 200000 : 2000;
  return n <= 65536 ? 2000 : n <= (4u << 20) ? 100 : 2;
}

int rank_main(int rank, const Options& o, void* lc0, const uint8_t* h0, int pipe_fds[2],
              int result_fd) {
  pin(o.cpu[rank]);
  void* ctx = nullptr;
  zcx_provider_init_t self{};
  self.size = sizeof(self);
  self.rank = rank;
  self.nranks = 2;
  self.secret = 0x62656e6368;
  snprintf(self.host, sizeof(self.host), "localhost");
  CHECK(P->init(&self, &ctx), "init");
  Link l = setup(rank, ctx, lc0, h0, pipe_fds);
  size_t max = 1;
  for (size_t s : o.sizes) max = s > max ? s : max;
  std::vector<char> buf(max, static_cast<char>(rank + 1));
  for (size_t n : o.sizes) {
    long it = default_iters(o, n);
    double v = o.test == "lat" ? run_lat(rank, l, buf, n, it) : run_bw(rank, l, buf, n, it, o.window);
    if (rank == 0) dprintf(result_fd, "%-12zu %10.3f\n", n, v);
  }
  (void)P->close_send(l.sc);
  (void)P->close_recv(l.rc);
  return 0;
}

Options parse(int argc, char** argv) {
  Options o;
  int c;
  while ((c = getopt(argc, argv, "t:s:n:w:c:")) != -1) {
    if (c == 't') o.test = optarg;
    else if (c == 's') o.sizes.push_back(strtoull(optarg, nullptr, 0));
    else if (c == 'n') o.iters = strtol(optarg, nullptr, 0);
    else if (c == 'w') o.window = atoi(optarg);
    else if (c == 'c') sscanf(optarg, "%d,%d", &o.cpu[0], &o.cpu[1]);
  }
  if (o.sizes.empty()) o.sizes = {8, 4096, 65536, 1 << 20, 64 << 20};
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  P = zcx_provider_shm();
  void* ctx0 = nullptr;
  zcx_provider_init_t self{};
  self.size = sizeof(self);
  self.rank = 0;
  self.nranks = 2;
  self.secret = 0x62656e6368;
  CHECK(P->init(&self, &ctx0), "init");
  uint8_t h0[ZCX_HANDLE_BYTES];
  void* lc0 = nullptr;
  CHECK(P->listen(ctx0, 0, h0, &lc0), "listen");
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return 2;
  printf("# zcx shm %s (%s)\n# %-10s %10s\n", o.test.c_str(),
         o.test == "lat" ? "one-way us" : "GB/s", "size", o.test == "lat" ? "us" : "GB/s");
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    std::perror("zcx-perf shm: fork");
    return 1;
  }
  if (child == 0) _exit(rank_main(1, o, nullptr, h0, pipe_fds, -1));
  int rc = rank_main(0, o, lc0, h0, pipe_fds, 1);
  int status = 0;
  waitpid(child, &status, 0);
  return rc != 0 ? rc : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}
