// ib provider faults over a real RDMA device (rxe0 in the rdma-vm guest): a peer killed in
// the middle of a transfer gives an error within a bound; a receive completed before its
// peer left still reports done; a receiver that advertises a bad
// rkey or an out-of-bounds clear-to-send entry (test hook ZCX_IB_TEST_CORRUPT_CTS) gets an
// error on both sides and nothing is written outside the registered buffer (canaries).
#include "ib_pair.h"

#include "common/clock.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace zcx::ibtest {
namespace {

#define ROLE_CHECK(cond, ...)                \
  do {                                       \
    if (!(cond)) {                           \
      fprintf(stderr, "FAILED %s: ", #cond); \
      fprintf(stderr, __VA_ARGS__);          \
      fprintf(stderr, "\n");                 \
      return 1;                              \
    }                                        \
  } while (0)

constexpr size_t kBig = 256u << 20;
constexpr double kBoundS = 15;  // error must come within this many seconds

// True once the child process (the other role) has exited, within `seconds`; the child is
// left for run_pair to reap (WNOWAIT).
bool child_exited_within(double seconds) {
  const int64_t t0 = now_ns();
  while (now_ns() - t0 < static_cast<int64_t>(seconds * 1e9)) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0)
      return true;
    usleep(10 * 1000);
  }
  return false;
}

class IbFault : public testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0)
      GTEST_SKIP() << "no RDMA device here: run inside tests/rdma-vm/run.sh (ctest -L rdma)";
  }
  // Short QP timeouts so a retry-exhausted error would also come quickly (~0.1 s).
  std::vector<std::pair<std::string, std::string>> fast_env{{"ZCX_IB_TIMEOUT", "12"},
                                                             {"ZCX_IB_RETRY_CNT", "2"}};
  config::ScopedOverride t_{"ZCX_IB_TIMEOUT", "12"};
  config::ScopedOverride r_{"ZCX_IB_RETRY_CNT", "2"};
};

TEST_F(IbFault, SenderKilledMidTransferReceiverErrorsWithinBound) {
  auto recv = [&](Side& s) {
    RegBuffer buf(s, kBig);
    ROLE_CHECK(buf.ok(), "register");
    void* d = buf.data();
    void* mh = buf.mh();
    size_t sz = kBig;
    int tag = 0;
    void* req = nullptr;
    ROLE_CHECK(recv_blocking(s, 1, &d, &sz, &tag, &mh, &req) == ZCX_SUCCESS, "irecv");
    int64_t t0 = now_ns();
    zcx_status_t rc = wait(s, req, nullptr, 120);
    double secs = (now_ns() - t0) / 1e9;
    fprintf(stderr, "receiver: status %d after %.2f s\n", rc, secs);
    ROLE_CHECK(rc == ZCX_ERR_REMOTE, "expected ZCX_ERR_REMOTE, got %d", rc);
    ROLE_CHECK(secs < kBoundS, "error took %.1f s", secs);
    return 0;
  };
  auto send = [&](Side& s) {
    RegBuffer buf(s, kBig);
    void* req = nullptr;
    ROLE_CHECK(send_blocking(s, buf.data(), kBig, 0, buf.mh(), &req) == ZCX_SUCCESS, "isend");
    int done = 0;
    (void)s.ops->test(req, &done, nullptr);
    usleep(200 * 1000);  // part of the 256 MiB is on the wire (about 5 s in the guest)
    ROLE_CHECK(done == 0, "transfer finished before the kill");
    kill(getpid(), SIGKILL);
    return 1;
  };
  PairResult r = run_pair(recv, send, true, fast_env);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.parent, 0);
  EXPECT_EQ(r.child_text(), "signal 9");
}

TEST_F(IbFault, ReceiverKilledMidTransferSenderErrorsWithinBound) {
  auto recv = [&](Side& s) {
    RegBuffer buf(s, kBig);
    void* d = buf.data();
    void* mh = buf.mh();
    size_t sz = kBig;
    int tag = 0;
    void* req = nullptr;
    ROLE_CHECK(recv_blocking(s, 1, &d, &sz, &tag, &mh, &req) == ZCX_SUCCESS, "irecv");
    int done = 0;
    int64_t t0 = now_ns();
    while (!done && now_ns() - t0 < 300 * 1000000ll) (void)s.ops->test(req, &done, nullptr);
    kill(getpid(), SIGKILL);
    return 1;
  };
  auto send = [&](Side& s) {
    RegBuffer buf(s, kBig);
    ROLE_CHECK(buf.ok(), "register");
    void* req = nullptr;
    ROLE_CHECK(send_blocking(s, buf.data(), kBig, 0, buf.mh(), &req) == ZCX_SUCCESS, "isend");
    int64_t t0 = now_ns();
    zcx_status_t rc = wait(s, req, nullptr, 120);
    double secs = (now_ns() - t0) / 1e9;
    fprintf(stderr, "sender: status %d after %.2f s\n", rc, secs);
    ROLE_CHECK(rc == ZCX_ERR_REMOTE, "expected ZCX_ERR_REMOTE, got %d", rc);
    ROLE_CHECK(secs < kBoundS, "error took %.1f s", secs);
    return 0;
  };
  PairResult r = run_pair(recv, send, /*child_sends=*/false, fast_env);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.parent, 0);
  EXPECT_EQ(r.child_text(), "signal 9");
}

// A receive that completed before its peer left reports done with its data, even from the
// first test() after the peer is gone (which sees the completion and the departure in one
// call); the receive after it fails with ZCX_ERR_REMOTE (provider.h, test()).
TEST_F(IbFault, AReceiveDoneBeforeThePeerLeftStillReportsDone) {
  constexpr size_t kMsg = 4096;
  auto recv = [&](Side& s) {
    RegBuffer first(s, kMsg), second(s, kMsg);
    ROLE_CHECK(first.ok() && second.ok(), "register");
    void* req[2] = {};
    RegBuffer* bufs[2] = {&first, &second};
    for (int k = 0; k < 2; ++k) {
      void* d = bufs[k]->data();
      void* mh = bufs[k]->mh();
      size_t sz = kMsg;
      int tag = 0;
      ROLE_CHECK(recv_blocking(s, 1, &d, &sz, &tag, &mh, &req[k]) == ZCX_SUCCESS, "irecv %d", k);
    }
    // Meanwhile the sender sends one message, closes and exits.
    ROLE_CHECK(child_exited_within(60), "the sender did not exit within 60 s");
    int done = 0;
    size_t got = 0;
    zcx_status_t rc = s.ops->test(req[0], &done, &got);
    ROLE_CHECK(rc == ZCX_SUCCESS && done == 1 && got == kMsg,
               "first test: status %d, done %d, %zu bytes (%s)", rc, done, got,
               zcx_get_last_error());
    ROLE_CHECK(verify(first.data(), kMsg, 7) < 0, "the completed receive's data differs");
    rc = wait(s, req[1], nullptr, kBoundS);
    ROLE_CHECK(rc == ZCX_ERR_REMOTE, "the second receive ended with %d, not REMOTE", rc);
    return 0;
  };
  auto send = [&](Side& s) {
    RegBuffer buf(s, kMsg);
    ROLE_CHECK(buf.ok(), "register");
    fill(buf.data(), kMsg, 7);
    void* req = nullptr;
    ROLE_CHECK(send_blocking(s, buf.data(), kMsg, 0, buf.mh(), &req) == ZCX_SUCCESS, "isend");
    ROLE_CHECK(wait(s, req, nullptr, 30) == ZCX_SUCCESS, "send");
    return 0;  // the harness closes the comm; the process exits
  };
  PairResult r = run_pair(recv, send, true, fast_env);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.parent, 0);
  EXPECT_TRUE(r.child_ok()) << r.child_text();
}

// The receiver (child, with the corrupting hook) must see its receive fail and its canary
// bytes untouched; the sender must get an error.
class IbCorruptCts : public IbFault, public testing::WithParamInterface<const char*> {};

TEST_P(IbCorruptCts, ErrorAndNothingWrittenOutside) {
  constexpr size_t kMsg = 64 * 1024, kCanary = 8192;
  const std::string mode = GetParam();
  auto recv = [&](Side& s) {
    RegBuffer buf(s, kMsg, kCanary);
    ROLE_CHECK(buf.ok(), "register");
    memset(buf.data(), 0, kMsg);
    void* d = buf.data();
    void* mh = buf.mh();
    size_t sz = kMsg;
    int tag = 0;
    void* req = nullptr;
    ROLE_CHECK(recv_blocking(s, 1, &d, &sz, &tag, &mh, &req) == ZCX_SUCCESS, "irecv");
    zcx_status_t rc = wait(s, req, nullptr, 30);
    fprintf(stderr, "receiver (%s): status %d\n", mode.c_str(), rc);
    ROLE_CHECK(rc != ZCX_SUCCESS, "the receive completed despite a corrupt CTS");
    ROLE_CHECK(buf.canaries_intact(), "bytes outside the registered buffer were written");
    return 0;
  };
  auto send = [&](Side& s) {
    size_t n = mode == "size" ? kMsg + 4096 : kMsg;  // trusts the corrupt size
    RegBuffer buf(s, n);
    fill(buf.data(), n, 42);
    void* req = nullptr;
    zcx_status_t rc = send_blocking(s, buf.data(), n, 0, buf.mh(), &req, 30);
    if (rc == ZCX_SUCCESS) rc = wait(s, req, nullptr, 30);
    fprintf(stderr, "sender (%s): status %d\n", mode.c_str(), rc);
    ROLE_CHECK(rc == ZCX_ERR_REMOTE || rc == ZCX_ERR_PROTOCOL, "sender got %d", rc);
    return 0;
  };
  PairResult r = run_pair(recv, send, /*child_sends=*/false,
                          {{"ZCX_IB_TEST_CORRUPT_CTS", mode}}, 120);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.parent, 0) << "sender side";
  EXPECT_TRUE(r.child_ok()) << "receiver side: " << r.child_text();
}

INSTANTIATE_TEST_SUITE_P(Modes, IbCorruptCts, testing::Values("rkey", "addr", "size", "seq"));

}  // namespace
}  // namespace zcx::ibtest
