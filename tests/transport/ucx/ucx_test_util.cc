#include "ucx_test_util.h"

#include "common/clock.h"
#include "common/status.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace zcx::ucx_test {

int64_t child_connect_ms = -1;

bool open_provider(Endpoint* ep, int rank, uint64_t secret) {
  ep->ops = zcx_provider_ucx();
  zcx_provider_init_t init{};
  init.size = sizeof(init);
  init.rank = rank;
  init.nranks = 2;
  init.secret = secret;
  snprintf(init.host, sizeof(init.host), "localhost-%d", rank);
  if (ep->ops->init(&init, &ep->ctx) != ZCX_SUCCESS) {
    ep->error = last_error();
    return false;
  }
  int ndev = 0;
  if (ep->ops->devices(ep->ctx, &ndev) != ZCX_SUCCESS || ndev != 1) {
    ep->error = "ucx provider has no device";
    return false;
  }
  return true;
}

void close_provider(Endpoint* ep) {
  if (ep->comm != nullptr) (void)ep->ops->close_send(ep->comm);
  if (ep->listen != nullptr) (void)ep->ops->close_listen(ep->listen);
  if (ep->ctx != nullptr) (void)ep->ops->finalize(ep->ctx);
  const zcx_provider_ops_t* ops = ep->ops;
  *ep = Endpoint{};
  ep->ops = ops;
}

bool accept_within(Endpoint* ep, int timeout_ms) {
  Deadline dl = Deadline::after_ms(timeout_ms);
  while (ep->comm == nullptr) {
    int rc = ep->ops->accept(ep->listen, &ep->comm);
    if (rc != ZCX_SUCCESS) {
      ep->error = std::string("accept: ") + zcx_status_string((zcx_status_t)rc) + ": " + last_error();
      return false;
    }
    if (ep->comm == nullptr && dl.expired()) {
      ep->error = "accept: timed out";
      return false;
    }
  }
  return true;
}

bool connect_within(Endpoint* ep, const void* handle, int timeout_ms) {
  Deadline dl = Deadline::after_ms(timeout_ms);
  while (ep->comm == nullptr) {
    int rc = ep->ops->connect(ep->ctx, 0, handle, &ep->comm);
    if (rc != ZCX_SUCCESS) {
      ep->error = std::string("connect: ") + zcx_status_string((zcx_status_t)rc) + ": " + last_error();
      return false;
    }
    if (ep->comm == nullptr && dl.expired()) {
      ep->error = "connect: timed out";
      return false;
    }
  }
  return true;
}

int isend_retry(Endpoint* ep, void* buf, size_t n, int tag, void* mh, void** request) {
  Deadline dl = Deadline::after_ms(20000);
  *request = nullptr;
  while (*request == nullptr) {
    int rc = ep->ops->isend(ep->comm, buf, n, tag, mh, request);
    if (rc != ZCX_SUCCESS) {
      ep->error = last_error();
      return rc;
    }
    if (*request == nullptr && dl.expired()) return ZCX_ERR_TIMEOUT;
  }
  return ZCX_SUCCESS;
}

int test_until_done(Endpoint* ep, void* request, size_t* sizes, int timeout_ms) {
  Deadline dl = Deadline::after_ms(timeout_ms);
  int done = 0;
  size_t local[8] = {};
  while (!done) {
    int rc = ep->ops->test(request, &done, sizes != nullptr ? sizes : local);
    if (rc != ZCX_SUCCESS) {
      ep->error = last_error();
      return rc;
    }
    if (!done && dl.expired()) {
      ep->error = "test: harness deadline passed";
      return ZCX_ERR_TIMEOUT;
    }
  }
  return ZCX_SUCCESS;
}

void fill_pattern(void* buf, size_t n, uint32_t seed) {
  auto* p = static_cast<uint8_t*>(buf);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    p[i] = static_cast<uint8_t>(x >> 16);
  }
}

bool check_pattern(const void* buf, size_t n, uint32_t seed) {
  auto* p = static_cast<const uint8_t*>(buf);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    if (p[i] != static_cast<uint8_t>(x >> 16)) return false;
  }
  return true;
}

namespace {

int child_main(int read_fd, const std::function<int(Endpoint&)>& child, uint64_t secret,
               const char* ucx_tls) {
  if (ucx_tls != nullptr) setenv("UCX_TLS", ucx_tls, 1);
  uint8_t handle[ZCX_HANDLE_BYTES];
  size_t got = 0;
  while (got < sizeof(handle)) {
    ssize_t n = read(read_fd, handle + got, sizeof(handle) - got);
    if (n <= 0) return 90;
    got += static_cast<size_t>(n);
  }
  Endpoint ep;
  if (!open_provider(&ep, 1, secret)) return 91;
  int64_t t0 = now_ms();
  bool connected = connect_within(&ep, handle, 20000);
  child_connect_ms = now_ms() - t0;
  if (!connected) {
    fprintf(stderr, "child: %s\n", ep.error.c_str());
    return 92;
  }
  int rc = child(ep);
  close_provider(&ep);
  return rc;
}

// Reversed roles: the child listens and receives, the parent connects and sends.
int child_listen_main(int write_fd, const std::function<int(Endpoint&)>& child) {
  Endpoint ep;
  uint8_t handle[ZCX_HANDLE_BYTES] = {};
  if (!open_provider(&ep, 1, kSecret)) return 91;
  if (ep.ops->listen(ep.ctx, 0, handle, &ep.listen) != ZCX_SUCCESS) return 93;
  if (write(write_fd, handle, sizeof(handle)) != static_cast<ssize_t>(sizeof(handle))) return 94;
  close(write_fd);
  if (!accept_within(&ep, 20000)) {
    fprintf(stderr, "child: %s\n", ep.error.c_str());
    return 92;
  }
  int rc = child(ep);
  (void)ep.ops->close_recv(ep.comm);
  ep.comm = nullptr;
  close_provider(&ep);
  return rc;
}

// The child's wait status, or -1 once it was killed at the deadline; `between` (optional)
// runs between polls.
int wait_child(pid_t pid, int timeout_ms, const std::function<void()>& between = nullptr) {
  Deadline dl = Deadline::after_ms(timeout_ms);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (dl.expired()) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    if (between) between();
    usleep(between ? 100 : 1000);
  }
  return status;
}

// After the parent's part: its worker keeps progressing (accept drives it) until the child
// exits, bounded. The child may still be flushing its close or wiring up a lane to this
// side; with this side's worker gone, UCX 1.13's tcp transport aborted the child on the
// refused connection (tcp_ep.c assertion, about 1 run in 900 under load).
int progress_until_child_exits(Endpoint& ep, pid_t pid, int timeout_ms) {
  return wait_child(pid, timeout_ms, [&ep] {
    void* extra = nullptr;
    if (ep.listen != nullptr) (void)ep.ops->accept(ep.listen, &extra);
    if (extra != nullptr) (void)ep.ops->close_recv(extra);
  });
}

// A fork that failed: the pair is not run (and pid -1 is never signalled or waited for).
ForkResult fork_failed(const int fds[2], ForkResult result) {
  result.error = std::string("fork: ") + std::strerror(errno);
  close(fds[0]);
  close(fds[1]);
  return result;
}

}  // namespace

ForkResult run_pair(const std::function<bool(Endpoint&, pid_t)>& parent,
                    const std::function<int(Endpoint&)>& child, uint64_t child_secret,
                    int timeout_ms, const char* child_ucx_tls) {
  ForkResult result;
  int fds[2];
  if (pipe(fds) != 0) return result;
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return fork_failed(fds, result);
  if (pid == 0) {
    close(fds[1]);
    _exit(child_main(fds[0], child, child_secret, child_ucx_tls));
  }
  close(fds[0]);
  Endpoint ep;
  uint8_t handle[ZCX_HANDLE_BYTES] = {};
  bool ok = open_provider(&ep, 0, kSecret) &&
            ep.ops->listen(ep.ctx, 0, handle, &ep.listen) == ZCX_SUCCESS;
  if (ok) ok = write(fds[1], handle, sizeof(handle)) == static_cast<ssize_t>(sizeof(handle));
  close(fds[1]);
  if (ok) ok = parent(ep, pid);
  result.error = ep.error;
  result.parent_ok = ok;
  if (ok) result.child_status = progress_until_child_exits(ep, pid, timeout_ms);
  if (ep.comm != nullptr) (void)ep.ops->close_recv(ep.comm);
  ep.comm = nullptr;
  close_provider(&ep);
  if (!ok) result.child_status = wait_child(pid, timeout_ms);
  return result;
}

ForkResult run_pair_reversed(const std::function<bool(Endpoint&, pid_t)>& parent,
                             const std::function<int(Endpoint&)>& child, int timeout_ms) {
  ForkResult result;
  int fds[2];
  if (pipe(fds) != 0) return result;
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return fork_failed(fds, result);
  if (pid == 0) {
    close(fds[0]);
    _exit(child_listen_main(fds[1], child));
  }
  close(fds[1]);
  Endpoint ep;
  uint8_t handle[ZCX_HANDLE_BYTES] = {};
  size_t got = 0;
  while (got < sizeof(handle)) {
    ssize_t n = read(fds[0], handle + got, sizeof(handle) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  bool ok = got == sizeof(handle) && open_provider(&ep, 0, kSecret) &&
            connect_within(&ep, handle, 20000);
  if (ok) ok = parent(ep, pid);
  result.error = ep.error;
  close_provider(&ep);
  result.parent_ok = ok;
  result.child_status = wait_child(pid, timeout_ms);
  return result;
}

bool ucx_available(std::string* why) {
  Endpoint ep;
  bool ok = open_provider(&ep, 0, kSecret);
  *why = ep.error;
  if (ep.ctx != nullptr) (void)ep.ops->finalize(ep.ctx);
  return ok;
}

}  // namespace zcx::ucx_test
