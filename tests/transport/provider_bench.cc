// A quick two-process benchmark of one provider (tuning aid; zcx-perf is the real tool).
//   zcx_provider_bench [provider] [bw_bytes] [iters] [pin]
// Forks: the child streams bw_bytes messages to the parent (window of 4), then both
// ping-pong 8-byte messages. Prints GB/s and the one-way latency (half round trip).
#include "base/registry.h"
#include "common/clock.h"
#include "transport/provider_util.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace zcx;
using namespace zcx::test;

namespace {

const zcx_provider_ops_t* g_ops;

void die(const char* what, zcx_status_t st) {
  fprintf(stderr, "[%d] %s failed: %s: %s\n", getpid(), what, zcx_status_string(st),
          zcx_get_last_error());
  exit(1);
}

// Drives connect (to handle) and accept (on listen) together until both are up.
void connect_both(ProviderCtx& me, const char* handle, void* listen, void** send,
                  void** recv) {
  Deadline dl = Deadline::after_ms(20000);
  *send = *recv = nullptr;
  while (*send == nullptr || *recv == nullptr) {
    if (dl.expired()) die("connection set-up", ZCX_ERR_TIMEOUT);
    zcx_status_t st = ZCX_SUCCESS;
    if (*send == nullptr) st = g_ops->connect(me.ctx, 0, handle, send);
    if (st == ZCX_SUCCESS && *recv == nullptr) st = g_ops->accept(listen, recv);
    if (st != ZCX_SUCCESS) die("connect/accept", st);
  }
}

void wait1(void* req) {
  std::vector<void*> r{req};
  zcx_status_t st = wait_requests(g_ops, r, nullptr, 60000);
  if (st != ZCX_SUCCESS) die("test", st);
}

// Spins on one request (no allocation, no clock: the ping-pong measures the provider).
void spin(void* req) {
  int done = 0;
  while (!done) {
    zcx_status_t st = g_ops->test(req, &done, nullptr);
    if (st != ZCX_SUCCESS) die("test", st);
  }
}

void stream(bool sender, void* comm, char* buf, size_t bytes, int iters) {
  const int window = 4;
  std::vector<void*> reqs;
  int posted = 0, done = 0;
  int64_t t0 = 0;
  while (done < iters) {
    while (posted < iters && posted - done < window) {
      void* r;
      size_t cap = bytes;
      int tag = 0;
      void* b = buf;
      zcx_status_t st = sender ? post_send(g_ops, comm, buf, bytes, 0, nullptr, &r)
                               : post_recv(g_ops, comm, 1, &b, &cap, &tag, nullptr, &r);
      if (st != ZCX_SUCCESS) die("post", st);
      reqs.push_back(r);
      ++posted;
    }
    wait1(reqs[static_cast<size_t>(done)]);
    if (++done == 1) t0 = now_ns();  // the first message is warm-up
  }
  double secs = static_cast<double>(now_ns() - t0) / 1e9;
  if (!sender)
    printf("bandwidth %zu B x %d: %.2f GB/s\n", bytes, iters - 1,
           static_cast<double>(bytes) * (iters - 1) / secs / 1e9);
}

void pingpong(bool initiator, void* send, void* recv, int iters) {
  char out[8] = {}, in[8];
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    int64_t t0 = now_ns();
    void *s, *r;
    void* b = in;
    size_t cap = sizeof in;
    int tag = 0;
    zcx_status_t st = post_recv(g_ops, recv, 1, &b, &cap, &tag, nullptr, &r);
    if (st != ZCX_SUCCESS) die("irecv", st);
    if (initiator) {
      st = post_send(g_ops, send, out, sizeof out, 0, nullptr, &s);
      if (st != ZCX_SUCCESS) die("isend", st);
      spin(s);
      spin(r);
    } else {
      spin(r);
      st = post_send(g_ops, send, out, sizeof out, 0, nullptr, &s);
      if (st != ZCX_SUCCESS) die("isend", st);
      spin(s);
    }
    us.push_back(static_cast<double>(now_ns() - t0) / 2e3);
  }
  if (!initiator) return;
  std::sort(us.begin(), us.end());
  printf("latency 8 B: median %.2f us, min %.2f us, p99 %.2f us\n", us[us.size() / 2], us[0],
         us[us.size() * 99 / 100]);
}

}  // namespace

int main(int argc, char** argv) {
  g_ops = provider_find(argc > 1 ? argv[1] : "tcp");
  if (g_ops == nullptr) die("provider lookup", ZCX_ERR_NO_DEVICE);
  size_t bytes = argc > 2 ? strtoull(argv[2], nullptr, 0) : (size_t{64} << 20);
  int iters = argc > 3 ? atoi(argv[3]) : 20;
  ProviderCtx parent;
  if (parent.init(g_ops, 0, 2, 42) != ZCX_SUCCESS) die("init", ZCX_ERR_INTERNAL);
  char h_parent[ZCX_HANDLE_BYTES], h_child[ZCX_HANDLE_BYTES];
  void *l_parent, *l_child;  // both made before fork; each side accepts only on its own
  if (g_ops->listen(parent.ctx, 0, h_parent, &l_parent) != ZCX_SUCCESS ||
      g_ops->listen(parent.ctx, 0, h_child, &l_child) != ZCX_SUCCESS)
    die("listen", ZCX_ERR_INTERNAL);
  std::vector<char> buf(std::max<size_t>(bytes, 1));
  memset(buf.data(), 1, buf.size());
  pid_t pid = fork();
  if (pid < 0) die("fork", ZCX_ERR_INTERNAL);
  bool child = pid == 0;
  if (argc > 4 && strcmp(argv[4], "pin") == 0) {  // one core each, as mpirun binds ranks
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(child ? 1 : 0, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  void *send, *recv;
  connect_both(parent, child ? h_parent : h_child, child ? l_child : l_parent, &send, &recv);
  stream(child, child ? send : recv, buf.data(), bytes, iters);
  pingpong(!child, send, recv, 2000);
  (void)g_ops->close_send(send);
  (void)g_ops->close_recv(recv);
  if (child) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
