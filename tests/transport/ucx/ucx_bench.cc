// zcx_ucx_bench: one-directional bandwidth of the ucx provider between two processes on this
// host, shaped like ucx_perftest tag_bw (a window of sends in flight, the receiver keeping the
// same number of receives posted). Prints one line per size:
//   size_bytes  iters  MB/s (2^20 bytes per MB, as ucx_perftest)  usec/msg
// Usage: zcx_ucx_bench [-s size[,size...]] [-n iters] [-w window] [-W warmup]
#include "ucx_test_util.h"

#include "common/clock.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace zcx::ucx_test {
namespace {

struct Options {
  std::vector<size_t> sizes{1 << 20};
  int iters = 1000;
  int window = 16;
  int warmup = 100;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], v = argv[i + 1];
    if (flag == "-s") {
      o.sizes.clear();
      for (size_t p = 0; p < v.size();) {
        size_t c = v.find(',', p);
        if (c == std::string::npos) c = v.size();
        o.sizes.push_back(std::stoull(v.substr(p, c - p)));
        p = c + 1;
      }
    } else if (flag == "-n") {
      o.iters = std::atoi(v.c_str());
    } else if (flag == "-w") {
      o.window = std::atoi(v.c_str());
    } else if (flag == "-W") {
      o.warmup = std::atoi(v.c_str());
    }
  }
  return o;
}

// Keeps `window` operations in flight until `total` have completed. post(i) starts op i.
template <typename Post>
bool pump(Endpoint& ep, int total, int window, Post post) {
  std::vector<void*> ring(static_cast<size_t>(window), nullptr);
  int posted = 0, completed = 0;
  while (completed < total) {
    while (posted < total && posted - completed < window) {
      void* req = post(posted);
      if (req == nullptr) break;
      ring[static_cast<size_t>(posted % window)] = req;
      ++posted;
    }
    if (posted == completed) continue;  // "retry later" with nothing in flight
    int done = 0;
    if (ep.ops->test(ring[static_cast<size_t>(completed % window)], &done, nullptr) != ZCX_SUCCESS) {
      fprintf(stderr, "test failed: %s\n", zcx_get_last_error());
      return false;
    }
    if (done) ++completed;
  }
  return true;
}

bool run_size(Endpoint& ep, bool sender, size_t size, const Options& o) {
  // One buffer for every message in flight, as ucx_perftest does (a buffer per slot would
  // measure cache and TLB misses, not the transport).
  std::vector<uint8_t> buf(size + 1, 1);
  void* mh = nullptr;
  if (ep.ops->reg_mr(ep.comm, buf.data(), buf.size(), ZCX_MEM_HOST, &mh) != ZCX_SUCCESS) return false;
  auto post = [&](int i) -> void* {
    void* req = nullptr;
    (void)i;
    uint8_t* p = buf.data();
    if (sender) {
      if (ep.ops->isend(ep.comm, p, size, 0, mh, &req) != ZCX_SUCCESS) {
        fprintf(stderr, "isend failed: %s\n", zcx_get_last_error());
        exit(1);
      }
    } else {
      void* data[1] = {p};
      size_t sizes[1] = {size};
      int tags[1] = {0};
      if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, &mh, &req) != ZCX_SUCCESS) {
        fprintf(stderr, "irecv failed: %s\n", zcx_get_last_error());
        exit(1);
      }
    }
    return req;
  };
  bool ok = pump(ep, o.warmup, o.window, post);
  int64_t t0 = now_ns();
  ok = ok && pump(ep, o.iters, o.window, post);
  double secs = static_cast<double>(now_ns() - t0) / 1e9;
  if (ok && !sender)
    printf("%zu %d %.2f %.3f\n", size, o.iters,
           static_cast<double>(size) * o.iters / secs / (1 << 20), secs * 1e6 / o.iters);
  fflush(stdout);
  (void)ep.ops->dereg_mr(ep.comm, mh);
  return ok;
}

}  // namespace
}  // namespace zcx::ucx_test

int main(int argc, char** argv) {
  using namespace zcx::ucx_test;
  Options o = parse(argc, argv);
  ForkResult r = run_pair(
      [&o](Endpoint& ep, pid_t) {
        if (!accept_within(&ep, 20000)) return false;
        for (size_t s : o.sizes)
          if (!run_size(ep, false, s, o)) return false;
        return true;
      },
      [&o](Endpoint& ep) {
        for (size_t s : o.sizes)
          if (!run_size(ep, true, s, o)) return 10;
        return 0;
      },
      kSecret, 600000);
  if (!r.parent_ok) fprintf(stderr, "zcx_ucx_bench: %s\n", r.error.c_str());
  return r.parent_ok && WIFEXITED(r.child_status) && WEXITSTATUS(r.child_status) == 0 ? 0 : 1;
}
