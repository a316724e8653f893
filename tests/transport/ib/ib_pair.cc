#include "ib_pair.h"

#include "common/clock.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace zcx::ibtest {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

zcx_provider_init_t self_info() {
  zcx_provider_init_t self{};
  self.size = sizeof self;
  self.rank = static_cast<int>(getpid() % 1000);
  self.nranks = 2;
  self.secret = 0x5ec12e7ab1e5eedull;
  snprintf(self.host, sizeof self.host, "test-host");
  return self;
}

bool open_side(Side* s, bool sender) {
  s->ops = zcx_provider_ib();
  s->sender = sender;
  zcx_provider_init_t self = self_info();
  if (s->ops->init(&self, &s->ctx) != ZCX_SUCCESS) return false;
  int n = 0;
  return s->ops->devices(s->ctx, &n) == ZCX_SUCCESS && n > 0;
}

void close_side(Side* s) {
  if (s->comm) (s->sender ? s->ops->close_send : s->ops->close_recv)(s->comm);
  if (s->ctx) s->ops->finalize(s->ctx);
  s->comm = nullptr;
  s->ctx = nullptr;
}

bool read_full(int fd, void* buf, size_t n, int timeout_ms) {
  auto* p = static_cast<uint8_t*>(buf);
  Deadline dl = Deadline::after_ms(timeout_ms);
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, dl.remaining_ms()) <= 0) return false;
    ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Listener side: listen, publish the handle, accept. Returns "" or the failure.
std::string do_listen_accept(Side* s, int pipe_w) {
  uint8_t handle[ZCX_HANDLE_BYTES] = {};
  void* lc = nullptr;
  if (s->ops->listen(s->ctx, 0, handle, &lc) != ZCX_SUCCESS) return "listen failed";
  if (write(pipe_w, handle, sizeof handle) != static_cast<ssize_t>(sizeof handle))
    return "handle pipe write failed";
  Deadline dl = Deadline::after_ms(60000);
  zcx_status_t rc = ZCX_SUCCESS;
  while (s->comm == nullptr && rc == ZCX_SUCCESS && !dl.expired()) {
    rc = s->ops->accept(lc, &s->comm);
    if (s->comm == nullptr) usleep(100);
  }
  s->ops->close_listen(lc);
  return s->comm ? "" : "accept failed (" + std::to_string(rc) + ")";
}

std::string do_connect(Side* s, int pipe_r) {
  uint8_t handle[ZCX_HANDLE_BYTES];
  if (!read_full(pipe_r, handle, sizeof handle, 60000)) return "no handle from the listener";
  Deadline dl = Deadline::after_ms(60000);
  zcx_status_t rc = ZCX_SUCCESS;
  while (s->comm == nullptr && rc == ZCX_SUCCESS && !dl.expired()) {
    rc = s->ops->connect(s->ctx, 0, handle, &s->comm);
    if (s->comm == nullptr) usleep(100);
  }
  return s->comm ? "" : "connect failed (" + std::to_string(rc) + ")";
}

// One process's whole life: open, connect or accept, run the role, close.
int run_role(const Role& role, bool sender, int pipe_fd, std::string* err) {
  Side s;
  if (!open_side(&s, sender)) {
    *err = "no ib device";
    close_side(&s);
    return 100;
  }
  *err = sender ? do_connect(&s, pipe_fd) : do_listen_accept(&s, pipe_fd);
  int rc = err->empty() ? role(s) : 101;
  close_side(&s);
  return rc;
}

}  // namespace

RegBuffer::RegBuffer(Side& s, size_t size, size_t canary) : side_(s), size_(size), canary_(canary) {
  size_t total = size + 2 * canary;
  void* p = mmap(nullptr, total ? total : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return;
  base_ = static_cast<uint8_t*>(p);
  memset(base_, 0xc5, canary);
  memset(base_ + canary + size, 0xc5, canary);
  ok_ = size == 0 ||
        s.ops->reg_mr(s.comm, data(), size, ZCX_MEM_HOST, &mh_) == ZCX_SUCCESS;
}

RegBuffer::~RegBuffer() {
  if (mh_) (void)side_.ops->dereg_mr(side_.comm, mh_);
  if (base_) munmap(base_, size_ + 2 * canary_ ? size_ + 2 * canary_ : 1);
}

bool RegBuffer::canaries_intact() const {
  for (size_t i = 0; i < canary_; ++i)
    if (base_[i] != 0xc5 || base_[canary_ + size_ + i] != 0xc5) return false;
  return true;
}

void fill(uint8_t* p, size_t n, uint64_t seed) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = mix(seed + i / 8);
    memcpy(p + i, &v, 8);
  }
  uint64_t v = mix(seed + i / 8);
  for (size_t k = 0; i < n; ++i, ++k) p[i] = static_cast<uint8_t>(v >> (8 * k));
}

long long verify(const uint8_t* p, size_t n, uint64_t seed) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = mix(seed + i / 8);
    if (memcmp(p + i, &v, 8) != 0)
      for (size_t k = 0; k < 8; ++k)
        if (p[i + k] != static_cast<uint8_t>(v >> (8 * k))) return static_cast<long long>(i + k);
  }
  uint64_t v = mix(seed + i / 8);
  for (size_t k = 0; i < n; ++i, ++k)
    if (p[i] != static_cast<uint8_t>(v >> (8 * k))) return static_cast<long long>(i);
  return -1;
}

zcx_status_t wait(Side& s, void* req, size_t* sizes, double seconds) {
  Deadline dl = Deadline::after_ms(static_cast<int64_t>(seconds * 1000));
  int done = 0;
  while (!done) {
    zcx_status_t rc = s.ops->test(req, &done, sizes);
    if (rc != ZCX_SUCCESS) return rc;
    if (!done && dl.expired()) return ZCX_ERR_TIMEOUT;
  }
  return ZCX_SUCCESS;
}

zcx_status_t send_blocking(Side& s, void* data, size_t size, int tag, void* mh, void** req,
                           double seconds) {
  Deadline dl = Deadline::after_ms(static_cast<int64_t>(seconds * 1000));
  for (*req = nullptr; *req == nullptr;) {
    zcx_status_t rc = s.ops->isend(s.comm, data, size, tag, mh, req);
    if (rc != ZCX_SUCCESS) return rc;
    if (*req == nullptr && dl.expired()) return ZCX_ERR_TIMEOUT;
  }
  return ZCX_SUCCESS;
}

zcx_status_t recv_blocking(Side& s, int n, void** data, size_t* sizes, int* tags, void** mhs,
                           void** req, double seconds) {
  Deadline dl = Deadline::after_ms(static_cast<int64_t>(seconds * 1000));
  for (*req = nullptr; *req == nullptr;) {
    zcx_status_t rc = s.ops->irecv(s.comm, n, data, sizes, tags, mhs, req);
    if (rc != ZCX_SUCCESS) return rc;
    if (*req == nullptr && dl.expired()) return ZCX_ERR_TIMEOUT;
  }
  return ZCX_SUCCESS;
}

int device_count() {
  Side s;
  bool ok = open_side(&s, false);
  close_side(&s);
  return ok ? 1 : 0;
}

bool PairResult::child_ok() const {
  return WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0;
}

std::string PairResult::child_text() const {
  if (WIFEXITED(child_status)) return "exit " + std::to_string(WEXITSTATUS(child_status));
  if (WIFSIGNALED(child_status)) return "signal " + std::to_string(WTERMSIG(child_status));
  return "status " + std::to_string(child_status);
}

PairResult run_pair(const Role& receiver, const Role& sender, bool child_sends,
                    const std::vector<std::pair<std::string, std::string>>& child_env,
                    double timeout_s) {
  PairResult out;
  int fds[2];
  if (pipe(fds) != 0) {
    out.error = "pipe failed";
    return out;
  }
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {  // nothing to run against (and pid -1 is never signalled)
    out.error = std::string("fork failed: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return out;
  }
  if (pid == 0) {
    for (const auto& [k, v] : child_env) config::set_override(k, v);
    std::string err;
    int rc = child_sends ? run_role(sender, true, fds[0], &err)
                         : run_role(receiver, false, fds[1], &err);
    if (!err.empty()) fprintf(stderr, "[child] harness: %s\n", err.c_str());
    fflush(nullptr);
    _exit(rc);
  }
  std::string err;
  out.parent = child_sends ? run_role(receiver, false, fds[1], &err)
                           : run_role(sender, true, fds[0], &err);
  out.error = err;
  close(fds[0]);
  close(fds[1]);
  Deadline dl = Deadline::after_ms(static_cast<int64_t>(timeout_s * 1000));
  while (waitpid(pid, &out.child_status, WNOHANG) == 0) {
    if (dl.expired()) {
      kill(pid, SIGKILL);
      waitpid(pid, &out.child_status, 0);
      out.error += " (child killed after timeout)";
      break;
    }
    usleep(10000);
  }
  return out;
}

}  // namespace zcx::ibtest
