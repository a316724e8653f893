// Faults: the sending peer is SIGKILLed in the middle of a transfer; the receiver's test()
// must fail within ZCX_TIMEOUT + 2 s with an error that names the peer.
#include "ucx_test_util.h"

#include "common/clock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace zcx::ucx_test {
namespace {

constexpr int kTimeoutS = 5;
constexpr size_t kLen = size_t{64} << 20;

class UcxKill : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    setenv("UCX_TLS", GetParam(), 1);
    setenv("ZCX_TIMEOUT", std::to_string(kTimeoutS).c_str(), 1);
  }
  void TearDown() override {
    unsetenv("UCX_TLS");
    unsetenv("ZCX_TIMEOUT");
  }
};

TEST_P(UcxKill, PeerKilledMidTransferFailsInTime) {
  double elapsed_s = -1;
  ForkResult r = run_pair(
      [&elapsed_s](Endpoint& ep, pid_t child) {
        if (!accept_within(&ep, 20000)) return false;
        std::vector<uint8_t> buf(kLen);
        void* data[1] = {buf.data()};
        size_t sizes[1] = {kLen};
        int tags[1] = {0};
        void* req = nullptr;
        // The first message completes: the connection works.
        if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, nullptr, &req) != ZCX_SUCCESS ||
            test_until_done(&ep, req, nullptr, 20000) != ZCX_SUCCESS)
          return false;
        // Second receive in flight, then the sender dies.
        if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, nullptr, &req) != ZCX_SUCCESS)
          return false;
        int done = 0;
        for (int i = 0; i < 50 && !done; ++i) (void)ep.ops->test(req, &done, nullptr);
        kill(child, SIGKILL);
        int64_t t0 = now_ns();
        int rc = test_until_done(&ep, req, nullptr, (kTimeoutS + 10) * 1000);
        elapsed_s = static_cast<double>(now_ns() - t0) / 1e9;
        if ((rc != ZCX_ERR_REMOTE && rc != ZCX_ERR_TIMEOUT) ||
            ep.error.find("rank 1") == std::string::npos) {
          ep.error = "expected a remote/timeout error naming rank 1, got " + std::to_string(rc) +
                     ": " + ep.error;
          return false;
        }
        printf("error after %.3f s: %s\n", elapsed_s, ep.error.c_str());
        return true;
      },
      [](Endpoint& ep) {
        std::vector<uint8_t> buf(kLen, 0x5a);
        for (;;) {  // sends until killed
          void* req = nullptr;
          if (isend_retry(&ep, buf.data(), kLen, 0, nullptr, &req) != ZCX_SUCCESS) return 10;
          if (test_until_done(&ep, req, nullptr, 60000) != ZCX_SUCCESS) return 11;
        }
      });
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  ASSERT_TRUE(r.parent_ok) << r.error;
  EXPECT_LT(elapsed_s, kTimeoutS + 2.0);
  EXPECT_TRUE(WIFSIGNALED(r.child_status));
}

// The other direction: the receiver dies while the survivor's large send is in flight.
TEST_P(UcxKill, ReceiverKilledMidTransferFailsSendInTime) {
  double elapsed_s = -1;
  ForkResult r = run_pair_reversed(
      [&elapsed_s](Endpoint& ep, pid_t child) {
        std::vector<uint8_t> buf(kLen, 0x5a);
        void* req = nullptr;
        if (isend_retry(&ep, buf.data(), kLen, 0, nullptr, &req) != ZCX_SUCCESS ||
            test_until_done(&ep, req, nullptr, 20000) != ZCX_SUCCESS)
          return false;
        if (isend_retry(&ep, buf.data(), kLen, 0, nullptr, &req) != ZCX_SUCCESS) return false;
        int done = 0;
        for (int i = 0; i < 50 && !done; ++i) (void)ep.ops->test(req, &done, nullptr);
        kill(child, SIGKILL);
        int64_t t0 = now_ns();
        int rc = done ? ZCX_SUCCESS : test_until_done(&ep, req, nullptr, (kTimeoutS + 10) * 1000);
        // The send may have finished before the kill (the data reached the receiver); then
        // the next one must fail.
        for (int i = 0; i < 3 && rc == ZCX_SUCCESS; ++i) {
          rc = isend_retry(&ep, buf.data(), kLen, 0, nullptr, &req);
          if (rc == ZCX_SUCCESS) rc = test_until_done(&ep, req, nullptr, (kTimeoutS + 10) * 1000);
        }
        elapsed_s = static_cast<double>(now_ns() - t0) / 1e9;
        if ((rc != ZCX_ERR_REMOTE && rc != ZCX_ERR_TIMEOUT) ||
            ep.error.find("rank 1") == std::string::npos) {
          ep.error = "expected a remote/timeout error naming rank 1, got " + std::to_string(rc) +
                     ": " + ep.error;
          return false;
        }
        printf("error after %.3f s: %s\n", elapsed_s, ep.error.c_str());
        return true;
      },
      [](Endpoint& ep) {
        std::vector<uint8_t> buf(kLen);
        void* data[1] = {buf.data()};
        size_t sizes[1] = {kLen};
        int tags[1] = {0};
        for (;;) {  // receives until killed
          void* req = nullptr;
          if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, nullptr, &req) != ZCX_SUCCESS) return 10;
          if (test_until_done(&ep, req, nullptr, 60000) != ZCX_SUCCESS) return 11;
        }
      });
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  ASSERT_TRUE(r.parent_ok) << r.error;
  EXPECT_LT(elapsed_s, kTimeoutS + 2.0);
  EXPECT_TRUE(WIFSIGNALED(r.child_status));
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxKill, testing::Values("tcp", "posix,cma"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param[0] == 't' ? "tcp" : "shm");
                         });

}  // namespace
}  // namespace zcx::ucx_test
