// Two processes drive the plugin as NCCL's proxies do: the parent is the receiving rank,
// a forked child the sending rank; the 128-byte handle travels over a pipe as NCCL's
// bootstrap would carry it. Each process dlopens the plugin itself (after the fork).
// Phases: single messages (0 B .. 3 MiB), grouped receives with per-buffer sizes, the
// optional-receive-completion sentinel, 32 x maxRecvs requests in flight with regMr/deregMr
// racing from another thread, iflush, and closing both ends with requests in flight.
#include "harness_util.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace zcx::plugin_test {
namespace {

constexpr size_t kSingleSizes[] = {0, 1, 100, 4096, 65543, 3u << 20};
constexpr size_t kBigBuf = 4u << 20;
constexpr size_t kSmall = 256;

#define ZCX_REQUIRE(cond, msg)                          \
  do {                                                  \
    if (!(cond)) return std::string(msg) + " [" #cond "]"; \
  } while (0)
#define ZCX_OK(expr)                         \
  do {                                       \
    std::string zcx_e_ = (expr);             \
    if (!zcx_e_.empty()) return zcx_e_;      \
  } while (0)

bool read_full(int fd, void* buf, size_t len, int timeout_ms) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return false;
    ssize_t n = read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

struct Shared {
  int max_recvs = 1;
  int grouped_n() const { return max_recvs < 4 ? max_recvs : 4; }
  int inflight() const { return 32 * max_recvs; }
};

// ---- sender (child) ----
std::string sender(NetDriver& d, void* sc, const Shared& sh, int ack_fd) {
  std::vector<char> buf(kBigBuf);
  void* mh = nullptr;
  ZCX_REQUIRE(d.reg_mr(sc, buf.data(), buf.size(), NCCL_PTR_HOST, &mh) == ncclSuccess, "regMr");
  int nulls = 0, size = -1;
  unsigned seed = 1;
  for (size_t s : kSingleSizes) {
    void* req;
    fill(buf.data(), s, seed++);
    ZCX_OK(isend_retry(d, sc, buf.data(), s, 0, mh, &req, &nulls));
    ZCX_OK(wait_done(d, req, &size));
    ZCX_REQUIRE(size == static_cast<int>(s), "send size reported by test");
  }
  // Grouped: n sends with tags in reverse order; receiver's buffers are ordered by tag.
  for (int t = sh.grouped_n() - 1; sh.max_recvs > 1 && t >= 0; --t) {
    void* req;
    size_t s = static_cast<size_t>(t + 1) * 1000 - static_cast<size_t>(t) * 3;
    fill(buf.data(), s, 100 + t);
    ZCX_OK(isend_retry(d, sc, buf.data(), s, t, mh, &req, &nulls));
    ZCX_OK(wait_done(d, req, &size));
  }
  void* req;
  fill(buf.data(), 64, 200);  // optional-completion receive
  ZCX_OK(isend_retry(d, sc, buf.data(), 64, 0, mh, &req, &nulls));
  ZCX_OK(wait_done(d, req, &size));
  // 32 x maxRecvs sends in flight before the first test, as a shared sendComm sees them.
  std::vector<void*> reqs(static_cast<size_t>(sh.inflight()));
  for (size_t i = 0; i < reqs.size(); ++i) {
    char* p = buf.data() + i * kSmall;
    fill(p, kSmall, 300 + static_cast<unsigned>(i));
    ZCX_OK(isend_retry(d, sc, p, kSmall, 0, mh, &reqs[i], &nulls));
  }
  for (void* r : reqs) ZCX_OK(wait_done(d, r, &size));
  char ack = 0;
  ZCX_REQUIRE(read_full(ack_fd, &ack, 1, 30000) && ack == 'A', "receiver's ack");
  // Close with sends in flight. The receiver is closing its end (and deregistering its
  // buffers) at the same time, so an error from these sends is a legitimate outcome.
  int done = 0;
  for (int i = 0; i < 2; ++i) {
    if (!isend_retry(d, sc, buf.data(), 1u << 20, 0, mh, &req, &nulls).empty()) break;
    (void)d.test(req, &done, &size);
  }
  ZCX_REQUIRE(d.dereg_mr(sc, mh) == ncclSuccess, "deregMr");
  ZCX_REQUIRE(d.close_send(sc) == ncclSuccess, "closeSend with requests in flight");
  if (nulls > 0) fprintf(stderr, "sender: %d NULL-request isend retries\n", nulls);
  return "";
}

// ---- receiver (parent) ----
std::string recv_singles(NetDriver& d, void* rc, char* buf, void* mh) {
  unsigned seed = 1;
  for (size_t s : kSingleSizes) {
    void *req, *dst = buf;
    size_t posted = kBigBuf;  // larger than the message, as NCCL posts
    int tag = 0, got = -1;
    ZCX_OK(irecv_retry(d, rc, 1, &dst, &posted, &tag, &mh, &req, false));
    ZCX_OK(wait_done(d, req, &got));
    ZCX_REQUIRE(got == static_cast<int>(s), "received size " + std::to_string(got) + " for " + std::to_string(s));
    std::string why;
    ZCX_REQUIRE(verify(buf, s, seed++, &why), why);
  }
  return "";
}

std::string recv_grouped(NetDriver& d, void* rc, char* buf, void* mh, int n) {
  void* dst[8];
  void* mhs[8];
  size_t posted[8];
  int tags[8], got[8] = {};
  for (int i = 0; i < n; ++i) {
    dst[i] = buf + static_cast<size_t>(i) * 8192;
    posted[i] = static_cast<size_t>(i + 1) * 1000;
    tags[i] = i;
    mhs[i] = mh;
  }
  void* req;
  ZCX_OK(irecv_retry(d, rc, n, dst, posted, tags, mhs, &req, false));
  ZCX_OK(wait_done(d, req, got));
  for (int i = 0; i < n; ++i) {
    size_t want = static_cast<size_t>(i + 1) * 1000 - static_cast<size_t>(i) * 3;
    ZCX_REQUIRE(got[i] == static_cast<int>(want), "grouped size of buffer " + std::to_string(i));
    std::string why;
    ZCX_REQUIRE(verify(dst[i], want, 100 + static_cast<unsigned>(i), &why), why);
  }
  return "";
}

std::string recv_inflight(NetDriver& d, void* rc, char* buf, void* mh, int count) {
  constexpr int kSteps = 8;  // NCCL posts up to NCCL_STEPS receives ahead
  std::vector<void*> reqs(static_cast<size_t>(count), nullptr);
  int posted = 0;
  for (int done = 0; done < count; ++done) {
    while (posted < count && posted - done < kSteps) {
      void* dst = buf + static_cast<size_t>(posted) * kSmall;
      size_t sz = kSmall;
      int tag = 0;
      ZCX_OK(irecv_retry(d, rc, 1, &dst, &sz, &tag, &mh, &reqs[static_cast<size_t>(posted)], false));
      ++posted;
    }
    int got = -1;
    ZCX_OK(wait_done(d, reqs[static_cast<size_t>(done)], &got));
    ZCX_REQUIRE(got == static_cast<int>(kSmall), "in-flight message size");
    std::string why;
    ZCX_REQUIRE(verify(buf + static_cast<size_t>(done) * kSmall, kSmall, 300 + static_cast<unsigned>(done), &why),
                "message " + std::to_string(done) + " out of order or corrupt: " + why);
  }
  return "";
}

std::string receiver(NetDriver& d, void* rc, void* lc, const Shared& sh, int ack_fd) {
  std::vector<char> buf(kBigBuf);
  void* mh = nullptr;
  ZCX_REQUIRE(d.reg_mr(rc, buf.data(), buf.size(), NCCL_PTR_HOST, &mh) == ncclSuccess, "regMr");
  ZCX_OK(recv_singles(d, rc, buf.data(), mh));
  if (sh.max_recvs > 1) ZCX_OK(recv_grouped(d, rc, buf.data(), mh, sh.grouped_n()));
  void *req, *dst = buf.data();
  size_t posted = 64;
  int tag = 0, got = -1;
  ZCX_OK(irecv_retry(d, rc, 1, &dst, &posted, &tag, &mh, &req, true));
  ZCX_OK(wait_done(d, req, &got));
  std::string why;
  ZCX_REQUIRE(got == 64 && verify(buf.data(), 64, 200, &why), "optional-completion receive " + why);
  // regMr/deregMr from another thread (NCCL's proxy service thread) while we test.
  std::atomic<bool> stop{false};
  std::atomic<int> reg_failures{0}, regs{0};
  std::vector<char> extra(1 << 16);
  std::thread service([&] {
    while (!stop.load()) {
      void* m = nullptr;
      if (d.reg_mr(rc, extra.data(), extra.size(), NCCL_PTR_HOST, &m) != ncclSuccess ||
          d.dereg_mr(rc, m) != ncclSuccess)
        ++reg_failures;
      ++regs;
    }
  });
  while (regs.load() < 20 && reg_failures.load() == 0) std::this_thread::yield();
  std::string inflight = recv_inflight(d, rc, buf.data(), mh, sh.inflight());
  stop = true;
  service.join();
  ZCX_OK(inflight);
  ZCX_REQUIRE(reg_failures.load() == 0, "concurrent regMr/deregMr failed");
  // iflush of host memory: NULL (nothing to flush) or a request that completes.
  int flush_size = 64;
  void* freq = reinterpret_cast<void*>(0xdead);
  ZCX_REQUIRE(d.iflush(rc, 1, &dst, &flush_size, &mh, &freq) == ncclSuccess, "iflush");
  if (freq != nullptr) ZCX_OK(wait_done(d, freq, nullptr));
  ZCX_REQUIRE(write(ack_fd, "A", 1) == 1, "ack write");
  // Close with receives in flight.
  for (int i = 0; i < 3; ++i) {
    void* r;
    dst = buf.data();
    posted = kBigBuf;
    ZCX_OK(irecv_retry(d, rc, 1, &dst, &posted, &tag, &mh, &r, false));
  }
  ZCX_REQUIRE(d.dereg_mr(rc, mh) == ncclSuccess, "deregMr");
  ZCX_REQUIRE(d.close_recv(rc) == ncclSuccess, "closeRecv with requests in flight");
  ZCX_REQUIRE(d.close_listen(lc) == ncclSuccess, "closeListen");
  fprintf(stderr, "receiver: %d concurrent regMr/deregMr pairs during the in-flight phase\n", regs.load());
  return "";
}

std::string run_child(const Case& c, int handle_fd, int ack_fd) {
  NetDriver d;
  std::string why, skip;
  ZCX_REQUIRE(open_plugin(c, &d, &why, &skip), "child init: " + why + skip);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  Shared sh;
  ZCX_REQUIRE(read_full(handle_fd, handle, sizeof handle, 20000), "handle from the parent");
  ZCX_REQUIRE(read_full(handle_fd, &sh.max_recvs, sizeof sh.max_recvs, 20000), "maxRecvs");
  void* sc = nullptr;
  auto start = std::chrono::steady_clock::now();
  while (sc == nullptr) {  // NCCL retries connect with the same handle buffer
    ZCX_REQUIRE(d.connect(0, handle, &sc) == ncclSuccess, "connect");
    ZCX_REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(20), "connect timeout");
  }
  ZCX_OK(sender(d, sc, sh, ack_fd));
  ZCX_REQUIRE(d.finalize() == ncclSuccess, "finalize");
  d.unload();
  return "";
}

class TwoProcessTest : public testing::TestWithParam<Case> {};

TEST_P(TwoProcessTest, DrivesEveryEntryPointLikeNcclsProxy) {
  const Case& c = GetParam();
  {
    NetDriver probe;  // skip cleanly when this build has no provider with a device
    std::string why, skip;
    if (!open_plugin(c, &probe, &why, &skip)) {
      if (!skip.empty()) GTEST_SKIP() << skip;
      FAIL() << why;
    }
    ASSERT_EQ(probe.finalize(), ncclSuccess);
  }
  int to_child[2], ack[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(ack), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(to_child[1]);
    close(ack[1]);
    std::string err = run_child(c, to_child[0], ack[0]);
    if (!err.empty()) fprintf(stderr, "sender (child) failed: %s\n", err.c_str());
    _exit(err.empty() ? 0 : 1);
  }
  close(to_child[0]);
  close(ack[0]);
  NetDriver d;
  std::string why, skip;
  ASSERT_TRUE(open_plugin(c, &d, &why, &skip)) << why << skip;
  Props p;
  ASSERT_EQ(d.properties(0, &p), ncclSuccess);
  Shared sh;
  sh.max_recvs = p.max_recvs;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *lc = nullptr, *rc = nullptr;
  ASSERT_EQ(d.listen(0, handle, &lc), ncclSuccess);
  ASSERT_EQ(write(to_child[1], handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
  ASSERT_EQ(write(to_child[1], &sh.max_recvs, sizeof sh.max_recvs), static_cast<ssize_t>(sizeof(int)));
  auto start = std::chrono::steady_clock::now();
  std::string err;
  while (rc == nullptr && err.empty()) {
    if (d.accept(lc, &rc) != ncclSuccess) err = "accept failed";
    else if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) err = "accept timeout";
  }
  if (err.empty()) err = receiver(d, rc, lc, sh, ack[1]);
  int status = 0;
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(100000);
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ADD_FAILURE() << "sender process timed out after 60 s";
  }
  EXPECT_EQ(err, "") << "receiver (parent)";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "sender (child) failed, see its stderr";
  EXPECT_EQ(d.finalize(), ncclSuccess);
  d.unload();
  close(to_child[1]);
  close(ack[1]);
}

INSTANTIATE_TEST_SUITE_P(AllVersions, TwoProcessTest, testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace zcx::plugin_test
