// In-process tests of the shm provider: both ends of each connection live in this process
// and one thread drives them, so every step of the protocol is exercised deterministically.
#include "common/config.h"
#include "shm/shm.h"
#include "shm_test_util.h"
#include "transport/provider_util.h"

#include <dirent.h>

#include <algorithm>
#include <ostream>
#include <string>

namespace zcx::shm_test {
namespace {

struct SizeCase {
  size_t size;
  const char* large;
};

// What gtest prints for a case (and ctest's test names carry), rather than its bytes.
void PrintTo(const SizeCase& c, std::ostream* os) { *os << c.size << " B, " << c.large; }

class ShmSizes : public ::testing::TestWithParam<SizeCase> {};

TEST_P(ShmSizes, DataArrivesIntact) {
  config::ScopedOverride mode("ZCX_SHM_LARGE", GetParam().large);
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  const size_t n = GetParam().size;
  std::vector<uint8_t> src(n + 1), dst(n + 1, 0xee);
  fill_pattern(src, static_cast<uint32_t>(n));
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> reqs(2, nullptr);
    void* bufs[1] = {dst.data()};
    size_t caps[1] = {n};
    int tags[1] = {7};
    ASSERT_EQ(ops()->irecv(p.rc, 1, bufs, caps, tags, nullptr, &reqs[0]), ZCX_SUCCESS);
    ASSERT_EQ(ops()->isend(p.sc, src.data(), n, 7, nullptr, &reqs[1]), ZCX_SUCCESS);
    ASSERT_NE(reqs[0], nullptr);
    ASSERT_NE(reqs[1], nullptr);
    std::vector<size_t> sizes(2, 99);
    ASSERT_EQ(wait_all(reqs, &sizes), ZCX_SUCCESS);
    EXPECT_EQ(sizes[0], n);
    EXPECT_EQ(sizes[1], n);
    EXPECT_EQ(first_diff(src, dst, n), -1);
    EXPECT_EQ(dst[n], 0xee) << "wrote past the end of the receive buffer";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Pipeline, ShmSizes,
    ::testing::Values(SizeCase{0, "pipeline"}, SizeCase{1, "pipeline"}, SizeCase{8, "pipeline"},
                      SizeCase{4064, "pipeline"}, SizeCase{4065, "pipeline"},
                      SizeCase{65536, "pipeline"}, SizeCase{262144, "pipeline"},
                      SizeCase{262145, "pipeline"}, SizeCase{(1 << 20) + 3, "pipeline"},
                      SizeCase{(3 << 20) + 5, "pipeline"}, SizeCase{(17 << 20) + 1, "pipeline"}),
    [](const ::testing::TestParamInfo<SizeCase>& i) { return std::to_string(i.param.size); });
INSTANTIATE_TEST_SUITE_P(
    Cma, ShmSizes,
    ::testing::Values(SizeCase{4065, "cma"}, SizeCase{8191, "cma"}, SizeCase{65536, "cma"},
                      SizeCase{(1 << 20) + 3, "cma"}, SizeCase{(9 << 20) + 7, "cma"}),
    [](const ::testing::TestParamInfo<SizeCase>& i) { return std::to_string(i.param.size); });

TEST(Shm, ProviderTableIsComplete) {
  const zcx_provider_ops_t* o = ops();
  ASSERT_NE(o, nullptr);
  EXPECT_STREQ(o->name, "shm");
  EXPECT_EQ(o->id, ZCX_PROVIDER_ID_SHM);
  EXPECT_EQ(o->flags, static_cast<uint32_t>(ZCX_PROVIDER_LOCAL_ONLY));
  Rank a(0);
  ASSERT_NE(a.ctx, nullptr);
  int ndev = 0;
  ASSERT_EQ(o->devices(a.ctx, &ndev), ZCX_SUCCESS);
  ASSERT_EQ(ndev, 1);
  zcx_device_props_t props;
  ASSERT_EQ(o->get_properties(a.ctx, 0, &props), ZCX_SUCCESS);
  EXPECT_GE(props.max_requests, 256);
  EXPECT_EQ(props.max_recvs, 8);
  EXPECT_EQ(props.mem_kinds, static_cast<uint32_t>(ZCX_MEM_HOST));
}

TEST(Shm, GroupedReceiveMatchesTags) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  const size_t sizes[8] = {0, 8, 5000, 300000, 1 << 20, 17, 4064, 70000};
  std::vector<std::vector<uint8_t>> src(8), dst(8);
  void* bufs[8];
  size_t caps[8];
  int tags[8];
  for (int i = 0; i < 8; ++i) {
    src[i].resize(sizes[i] + 1);
    fill_pattern(src[i], 100 + i);
    dst[i].assign(sizes[i] + 1, 0);
    bufs[i] = dst[i].data();
    caps[i] = sizes[i];
    tags[i] = 40 + i;
  }
  std::vector<void*> reqs(9, nullptr);
  ASSERT_EQ(ops()->irecv(p.rc, 8, bufs, caps, tags, nullptr, &reqs[0]), ZCX_SUCCESS);
  for (int k = 0; k < 8; ++k) {  // send in reverse tag order
    int i = 7 - k;
    ASSERT_EQ(ops()->isend(p.sc, src[i].data(), sizes[i], tags[i], nullptr, &reqs[1 + k]),
              ZCX_SUCCESS);
    ASSERT_NE(reqs[1 + k], nullptr);
  }
  // Sends past the chunk ring's size (ZCX_SHM_CHUNKS x ZCX_SHM_CHUNK_BYTES) finish only as
  // the receive drains the ring, so both are tested in turn.
  void* recv = reqs[0];
  reqs[0] = nullptr;
  int done = 0;
  size_t got[8] = {};
  size_t sends_left = 8;
  Deadline dl = Deadline::after_ms(60000);
  while ((!done || sends_left > 0) && !dl.expired()) {
    if (!done) {
      ASSERT_EQ(ops()->test(recv, &done, got), ZCX_SUCCESS);
    }
    ASSERT_EQ(test::test_each_once(ops(), reqs), ZCX_SUCCESS);
    sends_left = static_cast<size_t>(
        std::count_if(reqs.begin(), reqs.end(), [](void* r) { return r != nullptr; }));
  }
  ASSERT_TRUE(done);
  ASSERT_EQ(sends_left, 0u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i], sizes[i]) << "buffer " << i;
    EXPECT_EQ(first_diff(src[i], dst[i], sizes[i]), -1) << "buffer " << i;
  }
}

TEST(Shm, ManyRequestsInFlight) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  const int kN = 300;
  std::vector<std::vector<uint8_t>> src(kN), dst(kN);
  std::vector<void*> reqs(2 * kN, nullptr);
  for (int i = 0; i < kN; ++i) {
    size_t n = (i % 7 == 0) ? 70000 + i : 16 + i;
    src[i].resize(n);
    fill_pattern(src[i], i);
    dst[i].assign(n, 0);
    void* bufs[1] = {dst[i].data()};
    size_t caps[1] = {n};
    int tags[1] = {i};
    ASSERT_EQ(ops()->irecv(p.rc, 1, bufs, caps, tags, nullptr, &reqs[i]), ZCX_SUCCESS);
    ASSERT_NE(reqs[i], nullptr) << "receive " << i << " refused";
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(ops()->isend(p.sc, src[i].data(), src[i].size(), i, nullptr, &reqs[kN + i]),
              ZCX_SUCCESS);
    ASSERT_NE(reqs[kN + i], nullptr) << "send " << i << " refused";
  }
  ASSERT_EQ(wait_all(reqs), ZCX_SUCCESS);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(first_diff(src[i], dst[i], src[i].size()), -1) << i;
}

TEST(Shm, OversizedMessageIsAnErrorNotAnOverflow) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  std::vector<uint8_t> src(100000, 1), dst(1000 + 64, 0xaa);
  std::vector<void*> reqs(2, nullptr);
  void* bufs[1] = {dst.data()};
  size_t caps[1] = {1000};
  int tags[1] = {0};
  ASSERT_EQ(ops()->irecv(p.rc, 1, bufs, caps, tags, nullptr, &reqs[0]), ZCX_SUCCESS);
  ASSERT_EQ(ops()->isend(p.sc, src.data(), src.size(), 0, nullptr, &reqs[1]), ZCX_SUCCESS);
  int done = 0;
  zcx_status_t st = ZCX_SUCCESS;
  Deadline dl = Deadline::after_ms(5000);
  while (st == ZCX_SUCCESS && !done && !dl.expired()) st = ops()->test(reqs[0], &done, nullptr);
  EXPECT_EQ(st, ZCX_ERR_INVALID_USAGE);
  EXPECT_NE(std::string(zcx::last_error()).find("peer rank 1"), std::string::npos)
      << zcx::last_error();
  for (size_t i = 1000; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xaa);
}

// A receive that completes in the same progress call as a later message that fails the
// comm still reports done (with its data); the failure goes to the next request tested.
TEST(Shm, AReceiveDoneBeforeALaterFailureStillReportsDone) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  std::vector<uint8_t> first(10, 7), second(100, 8), dst_a(10), dst_b(5);
  void* bufs[2] = {dst_a.data(), dst_b.data()};
  size_t caps[2] = {dst_a.size(), dst_b.size()};
  int tags[1] = {0};
  void *ra = nullptr, *rb = nullptr;
  std::vector<void*> sends(2, nullptr);
  ASSERT_EQ(ops()->irecv(p.rc, 1, &bufs[0], &caps[0], tags, nullptr, &ra), ZCX_SUCCESS);
  ASSERT_EQ(ops()->irecv(p.rc, 1, &bufs[1], &caps[1], tags, nullptr, &rb), ZCX_SUCCESS);
  ASSERT_EQ(ops()->isend(p.sc, first.data(), first.size(), 0, nullptr, &sends[0]), ZCX_SUCCESS);
  ASSERT_EQ(ops()->isend(p.sc, second.data(), second.size(), 0, nullptr, &sends[1]),
            ZCX_SUCCESS);
  (void)wait_all(sends, nullptr, 200);  // small sends: in the ring at once
  int done = 0;
  size_t got = 0;
  ASSERT_EQ(ops()->test(ra, &done, &got), ZCX_SUCCESS) << zcx::last_error();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(got, first.size());
  EXPECT_EQ(dst_a, first);
  std::vector<void*> reqs{rb};
  EXPECT_EQ(wait_all(reqs, nullptr, 5000), ZCX_ERR_INVALID_USAGE);
}

TEST(Shm, WrongSecretIsRejectedOnBothSides) {
  Rank a(0, 111), b(1, 222);
  uint8_t handle[ZCX_HANDLE_BYTES];
  void* lc = nullptr;
  void* sc = nullptr;
  void* rc = nullptr;
  ASSERT_EQ(ops()->listen(a.ctx, 0, handle, &lc), ZCX_SUCCESS);
  ASSERT_EQ(connect_poll(b.ctx, handle, &sc), ZCX_SUCCESS);  // connect never waits for accept
  for (int i = 0; i < 1000 && rc == nullptr; ++i) ASSERT_EQ(ops()->accept(lc, &rc), ZCX_SUCCESS);
  EXPECT_EQ(rc, nullptr) << "a connection with the wrong secret was accepted";
  uint8_t byte = 1;
  void* req = nullptr;
  ASSERT_EQ(ops()->isend(sc, &byte, 1, 0, nullptr, &req), ZCX_SUCCESS);
  int done = 0;
  zcx_status_t st = ZCX_SUCCESS;
  Deadline dl = Deadline::after_ms(5000);
  // the inline send completes locally; the rejection surfaces on the next operation
  while (st == ZCX_SUCCESS && !dl.expired()) {
    if (req != nullptr) st = ops()->test(req, &done, nullptr);
    if (done) {
      req = nullptr;
      done = 0;
      st = ops()->isend(sc, &byte, 1, 0, nullptr, &req);
    }
  }
  EXPECT_EQ(st, ZCX_ERR_AUTH);
  EXPECT_NE(std::string(zcx::last_error()).find("secret"), std::string::npos);
  (void)ops()->close_send(sc);
  (void)ops()->close_listen(lc);
}

TEST(Shm, HandleFromAnotherHostFailsFast) {
  Rank a(0), b(1);
  uint8_t handle[ZCX_HANDLE_BYTES];
  void* lc = nullptr;
  void* sc = nullptr;
  ASSERT_EQ(ops()->listen(a.ctx, 0, handle, &lc), ZCX_SUCCESS);
  handle[8] ^= 0xff;  // first byte of the boot id
  EXPECT_EQ(ops()->connect(b.ctx, 0, handle, &sc), ZCX_ERR_NO_DEVICE);
  EXPECT_EQ(sc, nullptr);
  EXPECT_NE(std::string(zcx::last_error()).find("boot id"), std::string::npos);
  handle[0] ^= 0xff;  // corrupt magic
  EXPECT_EQ(ops()->connect(b.ctx, 0, handle, &sc), ZCX_ERR_INVALID_ARG);
  (void)ops()->close_listen(lc);
}

TEST(Shm, ClosedSenderFailsPendingReceiveNamingThePeer) {
  config::ScopedOverride t("ZCX_TIMEOUT", "30");
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  uint8_t buf[16];
  void* bufs[1] = {buf};
  size_t caps[1] = {sizeof(buf)};
  int tags[1] = {0};
  void* req = nullptr;
  ASSERT_EQ(ops()->irecv(p.rc, 1, bufs, caps, tags, nullptr, &req), ZCX_SUCCESS);
  (void)ops()->close_send(p.sc);
  p.sc = nullptr;
  int done = 0;
  zcx_status_t st = ZCX_SUCCESS;
  int64_t t0 = now_ms();
  while (st == ZCX_SUCCESS && !done && now_ms() - t0 < 5000) st = ops()->test(req, &done, nullptr);
  EXPECT_EQ(st, ZCX_ERR_REMOTE);
  EXPECT_LT(now_ms() - t0, 1000);
  EXPECT_NE(std::string(zcx::last_error()).find("peer rank 1"), std::string::npos);
}

TEST(Shm, MessagesSentBeforeCloseAreStillDelivered) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  std::vector<uint8_t> src(1000);
  fill_pattern(src, 5);
  for (int i = 0; i < 3; ++i) {
    std::vector<void*> reqs(1, nullptr);
    ASSERT_EQ(ops()->isend(p.sc, src.data(), src.size(), 0, nullptr, &reqs[0]), ZCX_SUCCESS);
    ASSERT_EQ(wait_all(reqs), ZCX_SUCCESS);
  }
  (void)ops()->close_send(p.sc);
  p.sc = nullptr;
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> dst(1000, 0);
    void* bufs[1] = {dst.data()};
    size_t caps[1] = {dst.size()};
    int tags[1] = {0};
    std::vector<void*> reqs(1, nullptr);
    ASSERT_EQ(ops()->irecv(p.rc, 1, bufs, caps, tags, nullptr, &reqs[0]), ZCX_SUCCESS);
    ASSERT_EQ(wait_all(reqs), ZCX_SUCCESS) << zcx::last_error();
    EXPECT_EQ(first_diff(src, dst, src.size()), -1);
  }
}

TEST(Shm, SilentPeerTimesOutWithinZcxTimeout) {
  config::ScopedOverride t("ZCX_TIMEOUT", "0.5");
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  uint8_t buf[16];
  void* bufs[1] = {buf};
  size_t caps[1] = {sizeof(buf)};
  int tags[1] = {0};
  void* req = nullptr;
  ASSERT_EQ(ops()->irecv(p.rc, 1, bufs, caps, tags, nullptr, &req), ZCX_SUCCESS);
  int done = 0;
  zcx_status_t st = ZCX_SUCCESS;
  int64_t t0 = now_ms();
  while (st == ZCX_SUCCESS && !done && now_ms() - t0 < 5000) st = ops()->test(req, &done, nullptr);
  EXPECT_EQ(st, ZCX_ERR_TIMEOUT);
  EXPECT_GE(now_ms() - t0, 450);
  EXPECT_LT(now_ms() - t0, 2500);
}

// D4-style tamper: garbage written into the shared ring is detected, never followed.
TEST(Shm, CorruptSlotIsDetected) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  auto* rc = static_cast<zcx::shm::Comm*>(p.rc);
  auto* slot = reinterpret_cast<zcx::shm::SlotHeader*>(rc->slots);
  slot->size = 1u << 20;  // inline message larger than a slot
  slot->tag = 0;
  slot->type = zcx::shm::kSlotInline;
  slot->seq.store(1, std::memory_order_release);
  std::vector<uint8_t> dst(2 << 20);
  EXPECT_EQ(receive_once(p, dst), ZCX_ERR_PROTOCOL);
  EXPECT_NE(std::string(zcx::last_error()).find("invalid inline size"), std::string::npos);
}

TEST(Shm, NothingIsCreatedInDevShm) {
  auto count = [] {
    int n = 0;
    if (DIR* d = opendir("/dev/shm")) {
      while (dirent* e = readdir(d)) n += std::string(e->d_name).find("zcx") != std::string::npos;
      closedir(d);
    }
    return n;
  };
  int before = count();
  {
    Rank a(0), b(1);
    Pair p;
    ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
    EXPECT_EQ(count(), before);
  }
  EXPECT_EQ(count(), before);
}

}  // namespace
}  // namespace zcx::shm_test
