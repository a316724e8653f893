// ib provider over a real RDMA device (Soft-RoCE rxe0 in the rdma-vm guest), two processes:
// sizes 0..256 MiB verified byte by byte, grouped receives, 256 in flight, multi-QP with
// split on and off, iflush. Skips where no RDMA device exists.
#include "ib_pair.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <list>
#include <ostream>

namespace zcx::ibtest {
namespace {

struct QpCase {
  int qps;
  bool split;
};

std::vector<std::pair<std::string, std::string>> qp_env(const QpCase& q) {
  return {{"ZCX_IB_QPS", std::to_string(q.qps)},
          {"ZCX_IB_SPLIT_DATA_ON_QPS", q.split ? "1" : "0"}};
}

// What gtest prints for a case (and ctest's test names carry), rather than its bytes.
void PrintTo(const QpCase& q, std::ostream* os) {
  *os << q.qps << (q.qps == 1 ? " QP" : " QPs") << (q.split ? ", data split" : ", whole");
}

class IbPair : public testing::TestWithParam<QpCase> {
 protected:
  void SetUp() override {
    if (device_count() == 0)
      GTEST_SKIP() << "no RDMA device here: run inside tests/rdma-vm/run.sh (ctest -L rdma)";
    // Both sides use the same QP settings: the sender (child) decides, the parent follows.
    for (const auto& [k, v] : qp_env(GetParam())) overrides_.emplace_back(k, v);
  }
  void expect_pair(const Role& recv, const Role& send) {
    PairResult r = run_pair(recv, send, true, qp_env(GetParam()));
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.parent, 0) << "receiver failed";
    EXPECT_TRUE(r.child_ok()) << "sender: " << r.child_text();
  }
  std::list<config::ScopedOverride> overrides_;
};

#define ROLE_CHECK(cond, ...)                     \
  do {                                            \
    if (!(cond)) {                                \
      fprintf(stderr, "FAILED %s: ", #cond);      \
      fprintf(stderr, __VA_ARGS__);               \
      fprintf(stderr, "\n");                      \
      return 1;                                   \
    }                                             \
  } while (0)

const std::vector<size_t> kSizes = {0,     1,     7,       64,          65,       127,
                                    128,   129,   1000,    4096,        65537,    1 << 20,
                                    (16u << 20) + 5, 256u << 20};

TEST_P(IbPair, SizesZeroTo256MiBVerified) {
  size_t max = kSizes.back();
  auto recv = [&](Side& s) {
    RegBuffer buf(s, max + 64);
    ROLE_CHECK(buf.ok(), "register %zu bytes", max + 64);
    for (size_t i = 0; i < kSizes.size(); ++i) {
      size_t posted = std::min(max + 64, kSizes[i] + (i % 2) * 64);  // sometimes larger
      void* data = buf.data();
      void* mh = buf.mh();
      void* req = nullptr;
      size_t got = 0;
      int tag = 0;
      ROLE_CHECK(recv_blocking(s, 1, &data, &posted, &tag, &mh, &req) == ZCX_SUCCESS, "irecv");
      ROLE_CHECK(wait(s, req, &got) == ZCX_SUCCESS, "receive of %zu bytes", kSizes[i]);
      ROLE_CHECK(got == kSizes[i], "size %zu reported for %zu", got, kSizes[i]);
      long long bad = verify(buf.data(), got, 1000 + i);
      ROLE_CHECK(bad < 0, "message %zu (%zu bytes): first wrong byte at %lld", i, got, bad);
    }
    return 0;
  };
  auto send = [&](Side& s) {
    RegBuffer buf(s, max);
    ROLE_CHECK(buf.ok(), "register %zu bytes", max);
    for (size_t i = 0; i < kSizes.size(); ++i) {
      fill(buf.data(), kSizes[i], 1000 + i);
      void* req = nullptr;
      size_t done = 0;
      ROLE_CHECK(send_blocking(s, buf.data(), kSizes[i], 0, buf.mh(), &req) == ZCX_SUCCESS,
                 "isend %zu", kSizes[i]);
      ROLE_CHECK(wait(s, req, &done) == ZCX_SUCCESS, "send of %zu bytes", kSizes[i]);
    }
    return 0;
  };
  expect_pair(recv, send);
}

// Grouped receives: 8 buffers per irecv; sends arrive in a scrambled tag order with
// different sizes; each buffer gets the message with its tag.
TEST_P(IbPair, GroupedReceivesMatchTags) {
  constexpr int kRounds = 12, kN = 8;
  constexpr size_t kBuf = 300000;
  auto size_of = [](int round, int tag) { return static_cast<size_t>((round * 7919 + tag * 104729) % kBuf); };
  auto recv = [&](Side& s) {
    RegBuffer buf(s, kBuf * kN);
    ROLE_CHECK(buf.ok(), "register");
    for (int round = 0; round < kRounds; ++round) {
      void* data[kN];
      void* mh[kN];
      size_t sizes[kN];
      int tags[kN];
      for (int i = 0; i < kN; ++i) {
        data[i] = buf.data() + i * kBuf;
        mh[i] = buf.mh();
        sizes[i] = kBuf;
        tags[i] = 10 + i;
      }
      void* req = nullptr;
      size_t got[kN] = {};
      ROLE_CHECK(recv_blocking(s, kN, data, sizes, tags, mh, &req) == ZCX_SUCCESS, "irecv");
      ROLE_CHECK(wait(s, req, got) == ZCX_SUCCESS, "grouped receive round %d", round);
      for (int i = 0; i < kN; ++i) {
        ROLE_CHECK(got[i] == size_of(round, i), "round %d buffer %d: %zu bytes", round, i, got[i]);
        long long bad = verify(static_cast<uint8_t*>(data[i]), got[i], round * 100 + i);
        ROLE_CHECK(bad < 0, "round %d buffer %d: byte %lld wrong", round, i, bad);
      }
    }
    return 0;
  };
  auto send = [&](Side& s) {
    RegBuffer buf(s, kBuf * kN);
    ROLE_CHECK(buf.ok(), "register");
    const int order[kN] = {5, 2, 7, 0, 3, 6, 1, 4};
    for (int round = 0; round < kRounds; ++round) {
      void* reqs[kN];
      for (int k = 0; k < kN; ++k) {
        int tag = order[(k + round) % kN];
        uint8_t* p = buf.data() + tag * kBuf;
        fill(p, size_of(round, tag), round * 100 + tag);
        ROLE_CHECK(send_blocking(s, p, size_of(round, tag), 10 + tag, buf.mh(), &reqs[k]) ==
                       ZCX_SUCCESS, "isend tag %d", tag);
      }
      for (int k = 0; k < kN; ++k) ROLE_CHECK(wait(s, reqs[k], nullptr) == ZCX_SUCCESS, "send");
    }
    return 0;
  };
  expect_pair(recv, send);
}

// 256 receives posted before any completes, and 256 sends in flight at once; then the
// same with 32 grouped receives of 8 (NCCL's 32 x 8).
TEST_P(IbPair, TwoHundredFiftySixInFlight) {
  constexpr int kMsgs = 256;
  constexpr size_t kMsg = 8192 + 3;
  auto recv = [&](Side& s) {
    RegBuffer buf(s, kMsg * kMsgs);
    ROLE_CHECK(buf.ok(), "register");
    std::vector<void*> reqs(kMsgs);
    for (int i = 0; i < kMsgs; ++i) {
      void* d = buf.data() + i * kMsg;
      void* mh = buf.mh();
      size_t sz = kMsg;
      int tag = 0;
      ROLE_CHECK(recv_blocking(s, 1, &d, &sz, &tag, &mh, &reqs[i], 1) == ZCX_SUCCESS,
                 "irecv %d of 256 refused", i);
    }
    for (int i = 0; i < kMsgs; ++i) {
      size_t got = 0;
      ROLE_CHECK(wait(s, reqs[i], &got) == ZCX_SUCCESS && got == kMsg, "receive %d", i);
      ROLE_CHECK(verify(buf.data() + i * kMsg, kMsg, 7000 + i) < 0, "data of message %d", i);
    }
    for (int g = 0; g < kMsgs / 8; ++g) {  // grouped: 32 x 8
      void* d[8];
      void* mh[8];
      size_t sz[8];
      int tags[8];
      for (int i = 0; i < 8; ++i) {
        d[i] = buf.data() + (g * 8 + i) * kMsg;
        mh[i] = buf.mh();
        sz[i] = kMsg;
        tags[i] = i;
      }
      ROLE_CHECK(recv_blocking(s, 8, d, sz, tags, mh, &reqs[g], 1) == ZCX_SUCCESS, "grouped irecv %d", g);
    }
    for (int g = 0; g < kMsgs / 8; ++g) {
      size_t got[8];
      ROLE_CHECK(wait(s, reqs[g], got) == ZCX_SUCCESS, "grouped receive %d", g);
      for (int i = 0; i < 8; ++i)
        ROLE_CHECK(got[i] == kMsg && verify(buf.data() + (g * 8 + i) * kMsg, kMsg, 9000 + g * 8 + i) < 0,
                   "grouped %d buffer %d", g, i);
    }
    return 0;
  };
  auto send = [&](Side& s) {
    RegBuffer buf(s, kMsg * kMsgs);
    ROLE_CHECK(buf.ok(), "register");
    std::vector<void*> reqs(kMsgs);
    for (int i = 0; i < kMsgs; ++i) fill(buf.data() + i * kMsg, kMsg, 7000 + i);
    for (int i = 0; i < kMsgs; ++i)
      ROLE_CHECK(send_blocking(s, buf.data() + i * kMsg, kMsg, 0, buf.mh(), &reqs[i]) == ZCX_SUCCESS,
                 "isend %d", i);
    for (int i = 0; i < kMsgs; ++i) ROLE_CHECK(wait(s, reqs[i], nullptr) == ZCX_SUCCESS, "send %d", i);
    // Wait until all 256 grouped CTS entries are there, then have 256 sends in flight.
    for (int i = 0; i < kMsgs; ++i) fill(buf.data() + i * kMsg, kMsg, 9000 + i);
    for (int i = 0; i < kMsgs; ++i)
      ROLE_CHECK(send_blocking(s, buf.data() + i * kMsg, kMsg, i % 8, buf.mh(), &reqs[i]) == ZCX_SUCCESS,
                 "grouped isend %d", i);
    for (int i = 0; i < kMsgs; ++i) ROLE_CHECK(wait(s, reqs[i], nullptr) == ZCX_SUCCESS, "send %d", i);
    return 0;
  };
  expect_pair(recv, send);
}

// A send larger than the posted receive fails with INVALID_USAGE on the sender.
TEST_P(IbPair, TruncationIsAnError) {
  auto recv = [&](Side& s) {
    RegBuffer buf(s, 100);
    void* d = buf.data();
    void* mh = buf.mh();
    size_t sz = 100;
    int tag = 0;
    void* req = nullptr;
    ROLE_CHECK(recv_blocking(s, 1, &d, &sz, &tag, &mh, &req) == ZCX_SUCCESS, "irecv");
    zcx_status_t rc = wait(s, req, nullptr, 30);
    ROLE_CHECK(rc != ZCX_SUCCESS, "the truncated receive completed");
    return 0;
  };
  auto send = [&](Side& s) {
    RegBuffer buf(s, 200);
    void* req = nullptr;
    zcx_status_t rc = send_blocking(s, buf.data(), 200, 0, buf.mh(), &req);
    ROLE_CHECK(rc == ZCX_ERR_INVALID_USAGE, "isend of 200 into 100 returned %d", rc);
    return 0;
  };
  expect_pair(recv, send);
}

// iflush (NCCL's GDR flush, on host memory here: the read-back runs all the same): after a
// receive, a flush request completes and leaves the data as it was; 300 flushes in a row
// reuse the comm's 256 flush requests; all-empty buffers need no flush (NULL request).
TEST_P(IbPair, FlushAfterReceiveCompletes) {
  constexpr size_t kBytes = 4096;
  auto recv = [&](Side& s) {
    RegBuffer buf(s, kBytes);
    ROLE_CHECK(buf.ok(), "register");
    ROLE_CHECK(s.ops->iflush != nullptr, "ib has no iflush");
    void* d = buf.data();
    void* mh = buf.mh();
    size_t sz = kBytes, got = 0;
    int tag = 0;
    void* req = nullptr;
    ROLE_CHECK(recv_blocking(s, 1, &d, &sz, &tag, &mh, &req) == ZCX_SUCCESS, "irecv");
    ROLE_CHECK(wait(s, req, &got) == ZCX_SUCCESS && got == kBytes, "receive (%zu bytes)", got);
    for (int i = 0; i < 300; ++i) {
      void* flush = nullptr;
      ROLE_CHECK(s.ops->iflush(s.comm, 1, &d, &got, &mh, &flush) == ZCX_SUCCESS, "iflush %d", i);
      ROLE_CHECK(flush != nullptr, "iflush %d gave no request", i);
      ROLE_CHECK(wait(s, flush, nullptr, 30) == ZCX_SUCCESS, "flush %d did not complete", i);
    }
    ROLE_CHECK(verify(buf.data(), kBytes, 77) < 0, "the data changed after the flushes");
    size_t empty = 0;
    void* none = &empty;
    ROLE_CHECK(s.ops->iflush(s.comm, 1, &d, &empty, &mh, &none) == ZCX_SUCCESS && none == nullptr,
               "a flush of an empty receive gave a request");
    return 0;
  };
  auto send = [&](Side& s) {
    RegBuffer buf(s, kBytes);
    ROLE_CHECK(buf.ok(), "register");
    fill(buf.data(), kBytes, 77);
    void* req = nullptr;
    ROLE_CHECK(send_blocking(s, buf.data(), kBytes, 0, buf.mh(), &req) == ZCX_SUCCESS, "isend");
    ROLE_CHECK(wait(s, req, nullptr) == ZCX_SUCCESS, "send");
    return 0;
  };
  expect_pair(recv, send);
}

INSTANTIATE_TEST_SUITE_P(Qps, IbPair,
                         testing::Values(QpCase{1, false}, QpCase{4, false}, QpCase{4, true}),
                         [](const testing::TestParamInfo<QpCase>& i) {
                           return "qps" + std::to_string(i.param.qps) +
                                  (i.param.split ? "_split" : "_whole");
                         });

}  // namespace
}  // namespace zcx::ibtest
