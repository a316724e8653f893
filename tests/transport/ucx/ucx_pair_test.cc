// The ucx provider between two processes (fork), over the UCX transports named by the test
// parameter (UCX_TLS). Data is verified byte by byte.
#include "ucx_test_util.h"

#include "common/clock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace zcx::ucx_test {
namespace {

class UcxPair : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (strcmp(GetParam(), "default") == 0) unsetenv("UCX_TLS");
    else setenv("UCX_TLS", GetParam(), 1);
  }
  void TearDown() override { unsetenv("UCX_TLS"); }

  // Fails the test on a parent error; a child exit code 91 means UCX is unusable: skip.
  void expect_pair(const ForkResult& r) {
    ASSERT_TRUE(r.parent_ok) << r.error;
    ASSERT_TRUE(WIFEXITED(r.child_status)) << "child killed or timed out";
    ASSERT_EQ(WEXITSTATUS(r.child_status), 0) << "child failed (see its stderr)";
  }
};

int send_one(Endpoint& ep, void* buf, size_t n, int tag, void* mh) {
  void* req = nullptr;
  while (req == nullptr) {
    int rc = ep.ops->isend(ep.comm, buf, n, tag, mh, &req);
    if (rc != ZCX_SUCCESS) return rc;
  }
  return test_until_done(&ep, req, nullptr, 20000);
}

const size_t kSizes[] = {0, 1, 8, 4095, 65536, 1 << 20, 9 << 20};

// Parent: accepts, then receives kSizes in order and checks every byte.
bool receive_sizes(Endpoint& ep, pid_t) {
  if (!accept_within(&ep, 20000)) return false;
  for (size_t i = 0; i < std::size(kSizes); ++i) {
    std::vector<uint8_t> buf(kSizes[i] + 64, 0xee);
    void* mh = nullptr;
    if (ep.ops->reg_mr(ep.comm, buf.data(), buf.size(), ZCX_MEM_HOST, &mh) != ZCX_SUCCESS)
      return false;
    void* data[1] = {buf.data()};
    size_t sizes[1] = {buf.size()};
    int tags[1] = {0};
    void* req = nullptr;
    if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, &mh, &req) != ZCX_SUCCESS) return false;
    size_t got[8] = {};
    if (test_until_done(&ep, req, got, 20000) != ZCX_SUCCESS) return false;
    bool ok = got[0] == kSizes[i] && check_pattern(buf.data(), kSizes[i], 7 + i);
    if (!ok)
      ep.error = "message " + std::to_string(i) + " wrong: got " + std::to_string(got[0]) +
                 " bytes, first byte " + std::to_string(buf[0]);
    (void)ep.ops->dereg_mr(ep.comm, mh);
    if (!ok) return false;
  }
  return true;
}

// Child: sends kSizes in order.
int send_sizes(Endpoint& ep) {
  for (size_t i = 0; i < std::size(kSizes); ++i) {
    std::vector<uint8_t> buf(kSizes[i] + 1);
    fill_pattern(buf.data(), kSizes[i], 7 + i);
    if (send_one(ep, buf.data(), kSizes[i], 0, nullptr) != ZCX_SUCCESS) return 10;
  }
  return 0;
}

TEST_P(UcxPair, SizesArriveIntactInOrder) {
  ForkResult r = run_pair(receive_sizes, send_sizes);
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  expect_pair(r);
}

// The acceptor uses tcp and runs a ucp_listener; the connector has only shared memory, where
// UCX's connection manager cannot connect, so it must say so in its hello and both must
// settle on the worker address (over posix/cma), with every byte arriving.
TEST(UcxSockaddr, ConnectorWithoutTcpUsesWorkerAddress) {
  setenv("UCX_TLS", "tcp,posix,cma", 1);
  ForkResult r = run_pair(receive_sizes, send_sizes, kSecret, 30000, "posix,cma");
  unsetenv("UCX_TLS");
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  ASSERT_TRUE(r.parent_ok) << r.error;
  ASSERT_TRUE(WIFEXITED(r.child_status)) << "child killed or timed out";
  EXPECT_EQ(WEXITSTATUS(r.child_status), 0) << "child failed (see its stderr)";
}

// 512 requests in flight each way, posted before any test(); order must be kept.
TEST_P(UcxPair, ManyInFlightKeepPostingOrder) {
  constexpr int kCount = 512;
  constexpr size_t kLen = 3000;
  ForkResult r = run_pair(
      [](Endpoint& ep, pid_t) {
        if (!accept_within(&ep, 20000)) return false;
        std::vector<uint8_t> buf(kCount * kLen);
        std::vector<void*> reqs(kCount);
        for (int i = 0; i < kCount; ++i) {
          void* data[1] = {buf.data() + i * kLen};
          size_t sizes[1] = {kLen};
          int tags[1] = {0};
          if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, nullptr, &reqs[i]) != ZCX_SUCCESS ||
              reqs[i] == nullptr)
            return false;
        }
        for (int i = 0; i < kCount; ++i) {
          size_t got[8] = {};
          if (test_until_done(&ep, reqs[i], got, 20000) != ZCX_SUCCESS) return false;
          if (got[0] != kLen || !check_pattern(buf.data() + i * kLen, kLen, 1000 + i)) {
            ep.error = "request " + std::to_string(i) + " out of order or corrupt";
            return false;
          }
        }
        return true;
      },
      [](Endpoint& ep) {
        std::vector<uint8_t> buf(kCount * kLen);
        std::vector<void*> reqs(kCount);
        for (int i = 0; i < kCount; ++i) {
          fill_pattern(buf.data() + i * kLen, kLen, 1000 + i);
          // Different tags on purpose: with single receives they must not change the order.
          if (isend_retry(&ep, buf.data() + i * kLen, kLen, i % 5, nullptr, &reqs[i]) != ZCX_SUCCESS)
            return 10;
        }
        for (int i = 0; i < kCount; ++i)
          if (test_until_done(&ep, reqs[i], nullptr, 20000) != ZCX_SUCCESS) return 11;
        return 0;
      });
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  expect_pair(r);
}

// Grouped receives of 8 buffers whose tags are in reverse order: each send lands in the
// buffer with its tag; two groups back to back keep their order.
TEST_P(UcxPair, GroupedReceiveChoosesBufferByTag) {
  constexpr int kN = 8;
  ForkResult r = run_pair(
      [](Endpoint& ep, pid_t) {
        if (!accept_within(&ep, 20000)) return false;
        for (int g = 0; g < 2; ++g) {
          std::vector<std::vector<uint8_t>> bufs(kN, std::vector<uint8_t>(200000));
          void* data[kN];
          size_t sizes[kN];
          int tags[kN];
          for (int i = 0; i < kN; ++i) {
            data[i] = bufs[i].data();
            sizes[i] = bufs[i].size();
            tags[i] = 100 + (kN - 1 - i);
          }
          void* req = nullptr;
          if (ep.ops->irecv(ep.comm, kN, data, sizes, tags, nullptr, &req) != ZCX_SUCCESS)
            return false;
          size_t got[kN] = {};
          if (test_until_done(&ep, req, got, 20000) != ZCX_SUCCESS) return false;
          for (int i = 0; i < kN; ++i) {
            int t = tags[i] - 100;
            size_t len = static_cast<size_t>(t) * 20000 + g;
            if (got[i] != len || !check_pattern(data[i], len, g * 100 + t)) {
              ep.error = "group " + std::to_string(g) + " buffer " + std::to_string(i) + " wrong";
              return false;
            }
          }
        }
        return true;
      },
      [](Endpoint& ep) {
        for (int g = 0; g < 2; ++g) {
          std::vector<std::vector<uint8_t>> bufs(kN);
          std::vector<void*> reqs(kN);
          for (int t = 0; t < kN; ++t) {
            size_t len = static_cast<size_t>(t) * 20000 + g;
            bufs[t].resize(len + 1);
            fill_pattern(bufs[t].data(), len, g * 100 + t);
            if (isend_retry(&ep, bufs[t].data(), len, 100 + t, nullptr, &reqs[t]) != ZCX_SUCCESS)
              return 10;
          }
          for (int t = 0; t < kN; ++t)
            if (test_until_done(&ep, reqs[t], nullptr, 20000) != ZCX_SUCCESS) return 11;
        }
        return 0;
      });
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  expect_pair(r);
}

TEST_P(UcxPair, TruncationIsInvalidUsageNamingPeer) {
  for (size_t len : {size_t{100}, size_t{4} << 20}) {
    ForkResult r = run_pair(
        [len](Endpoint& ep, pid_t) {
          if (!accept_within(&ep, 20000)) return false;
          std::vector<uint8_t> buf(len / 2);
          void* data[1] = {buf.data()};
          size_t sizes[1] = {buf.size()};
          int tags[1] = {0};
          void* req = nullptr;
          if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, nullptr, &req) != ZCX_SUCCESS)
            return false;
          int rc = test_until_done(&ep, req, nullptr, 20000);
          if (rc != ZCX_ERR_INVALID_USAGE || ep.error.find("truncated") == std::string::npos ||
              ep.error.find("rank 1") == std::string::npos) {
            ep.error = "expected truncation naming rank 1, got " + std::to_string(rc) + ": " +
                       ep.error;
            return false;
          }
          return true;
        },
        [len](Endpoint& ep) {
          std::vector<uint8_t> buf(len);
          void* req = nullptr;
          if (isend_retry(&ep, buf.data(), len, 0, nullptr, &req) != ZCX_SUCCESS) return 10;
          (void)test_until_done(&ep, req, nullptr, 3000);  // may fail: the receiver gave up
          return 0;
        });
    if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable";
    expect_pair(r);
  }
}

// A connector with another job's secret is turned away on both sides.
TEST_P(UcxPair, WrongSecretIsRejected) {
  ForkResult r = run_pair(
      [](Endpoint& ep, pid_t) {
        Deadline dl = Deadline::after_ms(20000);
        while (!dl.expired()) {
          int rc = ep.ops->accept(ep.listen, &ep.comm);
          if (rc == ZCX_ERR_AUTH) return true;
          if (rc != ZCX_SUCCESS || ep.comm != nullptr) {
            ep.error = "accept did not reject the stranger";
            return false;
          }
        }
        ep.error = "accept: no rejection before the deadline";
        return false;
      },
      [](Endpoint& ep) {
        // connect returned at once (it does not wait for accept); the rejection shows on
        // the first isend, which must fail with ZCX_ERR_AUTH.
        uint8_t byte = 0;
        Deadline dl = Deadline::after_ms(20000);
        while (!dl.expired()) {
          void* req = nullptr;
          int rc = ep.ops->isend(ep.comm, &byte, 1, 0, nullptr, &req);
          if (rc == ZCX_ERR_AUTH) return 42;
          if (rc != ZCX_SUCCESS || req != nullptr) return 43;
        }
        return 44;
      },
      kSecret ^ 1);
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  ASSERT_TRUE(r.parent_ok) << r.error;
  ASSERT_TRUE(WIFEXITED(r.child_status));
  EXPECT_EQ(WEXITSTATUS(r.child_status), 42) << "42: rejected with ZCX_ERR_AUTH";
}

// connect completes before the peer calls accept: the acceptor here waits 2 s first.
TEST_P(UcxPair, ConnectDoesNotWaitForAccept) {
  ForkResult r = run_pair(
      [](Endpoint& ep, pid_t) {
        usleep(2000000);
        if (!accept_within(&ep, 20000)) return false;
        uint8_t byte = 0;
        void* data[1] = {&byte};
        size_t sizes[1] = {1};
        int tags[1] = {0};
        void* req = nullptr;
        size_t got[8] = {};
        return ep.ops->irecv(ep.comm, 1, data, sizes, tags, nullptr, &req) == ZCX_SUCCESS &&
               test_until_done(&ep, req, got, 20000) == ZCX_SUCCESS && got[0] == 1 && byte == 7;
      },
      [](Endpoint& ep) {
        if (child_connect_ms > 1000) return 11;  // connect waited for accept
        uint8_t byte = 7;
        return send_one(ep, &byte, 1, 0, nullptr) == ZCX_SUCCESS ? 0 : 10;
      });
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  expect_pair(r);
}

// The sender closes after one message: that message still arrives, and a receive for a
// message it never sent fails promptly with an error naming it (no wait for ZCX_TIMEOUT).
TEST_P(UcxPair, PeerCloseFailsOnlyReceivesItNeverSent) {
  ForkResult r = run_pair(
      [](Endpoint& ep, pid_t) {
        if (!accept_within(&ep, 20000)) return false;
        std::vector<uint8_t> buf(100000);
        void* data[1] = {buf.data()};
        size_t sizes[1] = {buf.size()};
        int tags[1] = {0};
        void* req = nullptr;
        usleep(300000);  // let the sender close first
        size_t got[8] = {};
        if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, nullptr, &req) != ZCX_SUCCESS ||
            test_until_done(&ep, req, got, 20000) != ZCX_SUCCESS || got[0] != 99999 ||
            !check_pattern(buf.data(), 99999, 3)) {
          ep.error = "the message sent before close was lost: " + ep.error;
          return false;
        }
        if (ep.ops->irecv(ep.comm, 1, data, sizes, tags, nullptr, &req) != ZCX_SUCCESS) return false;
        int64_t t0 = now_ns();
        int rc = test_until_done(&ep, req, nullptr, 20000);
        double secs = static_cast<double>(now_ns() - t0) / 1e9;
        if (rc != ZCX_ERR_REMOTE || ep.error.find("closed") == std::string::npos ||
            ep.error.find("rank 1") == std::string::npos || secs > 2.0) {
          ep.error = "expected a prompt 'closed' error naming rank 1, got " + std::to_string(rc) +
                     " after " + std::to_string(secs) + " s: " + ep.error;
          return false;
        }
        return true;
      },
      [](Endpoint& ep) {
        std::vector<uint8_t> buf(99999);
        fill_pattern(buf.data(), buf.size(), 3);
        return send_one(ep, buf.data(), buf.size(), 0, nullptr) == ZCX_SUCCESS ? 0 : 10;
      });
  if (!r.parent_ok && r.error == "ucx provider has no device") GTEST_SKIP() << "UCX unusable here";
  expect_pair(r);
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxPair, testing::Values("tcp", "posix,cma", "default"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == ',') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace zcx::ucx_test
