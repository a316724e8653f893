// allgather, barrier and send/recv with 1, 2 and 4 ranks as threads.
#include "common/bootstrap/bootstrap.h"
#include "bootstrap/test_util.h"
#include "common/bootstrap/bootstrap_internal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace zcx {
namespace {

class BootstrapOps : public ::testing::TestWithParam<int> {
 protected:
  config::ScopedOverride timeout_{"ZCX_TIMEOUT", "20"};

  // Inits n ranks on threads, then runs body(bs, rank) on each.
  void run(int n, const std::function<void(Bootstrap&, int)>& body) {
    UniqueId id;
    ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
    std::vector<std::unique_ptr<Bootstrap>> bs(static_cast<size_t>(n));
    std::atomic<int> failures{0};
    test::run_threads(n, [&](int r) {
      if (failed(Bootstrap::init(id, r, n, &bs[static_cast<size_t>(r)]))) {
        ADD_FAILURE() << "rank " << r << ": " << last_error();
        ++failures;
      }
    });
    ASSERT_EQ(failures.load(), 0);
    test::run_threads(n, [&](int r) { body(*bs[static_cast<size_t>(r)], r); });
  }
};

TEST_P(BootstrapOps, InitKnowsEveryRank) {
  int n = GetParam();
  run(n, [&](Bootstrap& bs, int r) {
    EXPECT_EQ(bs.rank(), r);
    EXPECT_EQ(bs.nranks(), n);
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(bs.pid(p), getpid());
      EXPECT_EQ(bs.host(p), local_host_name().substr(0, 63));
    }
    EXPECT_EQ(describe_peer(bs, 0), "rank 0 (" + bs.host(0) + ")");
  });
}

TEST_P(BootstrapOps, AllgatherIsByteExact) {
  int n = GetParam();
  run(n, [&](Bootstrap& bs, int r) {
    for (size_t bytes : {size_t{1}, size_t{13}, size_t{4096}, size_t{100000}}) {
      std::vector<uint8_t> buf(bytes * static_cast<size_t>(n), 0xee);
      for (size_t i = 0; i < bytes; ++i)
        buf[static_cast<size_t>(r) * bytes + i] = static_cast<uint8_t>(r * 31 + i);
      ASSERT_EQ(bs.allgather(buf.data(), bytes), Status::kSuccess) << last_error();
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < bytes; ++i)
          ASSERT_EQ(buf[static_cast<size_t>(p) * bytes + i], static_cast<uint8_t>(p * 31 + i))
              << "rank " << r << " slot " << p << " byte " << i;
    }
  });
}

TEST_P(BootstrapOps, BarrierOrdersRanks) {
  int n = GetParam();
  std::atomic<int> arrived{0};
  run(n, [&](Bootstrap& bs, int) {
    for (int round = 0; round < 20; ++round) {
      ++arrived;
      ASSERT_EQ(bs.barrier(), Status::kSuccess) << last_error();
      EXPECT_GE(arrived.load(), n * (round + 1));
      ASSERT_EQ(bs.barrier(), Status::kSuccess) << last_error();
    }
  });
}

TEST_P(BootstrapOps, SendRecvMatchesPeerAndTag) {
  int n = GetParam();
  run(n, [&](Bootstrap& bs, int r) {
    // Every rank sends two tagged messages to every rank (itself included)...
    for (int p = 0; p < n; ++p)
      for (int tag : {7, 3}) {
        int msg[2] = {r, tag * 100 + p};
        ASSERT_EQ(bs.send(p, tag, msg, sizeof msg), Status::kSuccess) << last_error();
      }
    // ...and receives them in another order: tag 3 first, peers from the highest.
    for (int tag : {3, 7})
      for (int p = n - 1; p >= 0; --p) {
        int msg[2] = {-1, -1};
        ASSERT_EQ(bs.recv(p, tag, msg, sizeof msg), Status::kSuccess) << last_error();
        EXPECT_EQ(msg[0], p);
        EXPECT_EQ(msg[1], tag * 100 + r);
      }
  });
}

TEST_P(BootstrapOps, RecvOfWrongSizeIsAnError) {
  int n = GetParam();
  run(n, [&](Bootstrap& bs, int r) {
    int peer = (r + 1) % n, from = (r + n - 1) % n;
    char msg[8] = "abcdefg";
    ASSERT_EQ(bs.send(peer, 1, msg, sizeof msg), Status::kSuccess);
    char small[4];
    EXPECT_EQ(bs.recv(from, 1, small, sizeof small), Status::kInvalidUsage);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapOps, ::testing::Values(1, 2, 4));

TEST(BootstrapArgs, InvalidArgumentsAreErrors) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "5");
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  std::unique_ptr<Bootstrap> bs;
  EXPECT_EQ(Bootstrap::init(id, 1, 1, &bs), Status::kInvalidArg);
  EXPECT_EQ(Bootstrap::init(id, -1, 2, &bs), Status::kInvalidArg);
  EXPECT_EQ(Bootstrap::init(id, 0, 0, &bs), Status::kInvalidArg);
  EXPECT_EQ(Bootstrap::init(id, 0, 1, nullptr), Status::kInvalidArg);
  ASSERT_EQ(Bootstrap::init(id, 0, 1, &bs), Status::kSuccess);
  EXPECT_EQ(bs->allgather(nullptr, 4), Status::kInvalidArg);
  EXPECT_EQ(bs->send(1, 0, "x", 1), Status::kInvalidArg);
  EXPECT_EQ(bs->send(0, -1, "x", 1), Status::kInvalidArg);
  EXPECT_EQ(bs->send(0, 0, nullptr, 1), Status::kInvalidArg);
  EXPECT_EQ(bs->send(0, 0, "x", SIZE_MAX), Status::kInvalidArg);
  EXPECT_EQ(bs->recv(-5, 0, nullptr, 0), Status::kInvalidArg);
  bs->abort();
  bs->abort();  // idempotent
  EXPECT_EQ(bs->barrier(), Status::kAborted);
}

TEST(BootstrapTimeout, MissingRankTimesOutNamingIt) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "1.5");
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  std::unique_ptr<Bootstrap> bs;
  int64_t t0 = now_ms();
  EXPECT_EQ(Bootstrap::init(id, 0, 3, &bs), Status::kTimeout);
  int64_t took = now_ms() - t0;
  EXPECT_GE(took, 1400);
  EXPECT_LE(took, 3500);
  EXPECT_NE(std::string(last_error()).find("1,2"), std::string::npos) << last_error();
}

TEST(BootstrapTimeout, UnreachableRootTimesOut) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "1");
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  (void)take_reserved_listener(id);  // closes it: nobody listens there now
  std::unique_ptr<Bootstrap> bs;
  int64_t t0 = now_ms();
  EXPECT_EQ(Bootstrap::init(id, 1, 2, &bs), Status::kTimeout);
  EXPECT_LE(now_ms() - t0, 3000);
  EXPECT_NE(std::string(last_error()).find("root"), std::string::npos) << last_error();
}

}  // namespace
}  // namespace zcx
