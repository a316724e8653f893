// Interleave groups (transport/shm/shm_interleave.cc): pipelined messages in flight together
// share the chunk stream, land intact in the right buffers, complete in posting order, and
// never wait on a receive that is not posted; with ZCX_SHM_LARGE=auto, CMA and pipelined
// messages mixed in one window; groups cut fine or coarse (ZCX_SHM_STREAM). In-process, one
// thread drives both ends.
#include "bootstrap/test_util.h"
#include "common/clock.h"
#include "shm/shm.h"
#include "shm_test_util.h"

#include <string>

namespace zcx::shm_test {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

struct Message {
  size_t size;
  int tag;
};

// One window of messages: message k's send buffer, its receive buffer, and the requests.
struct Window {
  std::vector<std::vector<uint8_t>> src, dst;
  std::vector<void*> sends, recvs;
};

// Posts the receives: per_request[i] consecutive messages per receive request.
void post_receives(Pair& p, const std::vector<Message>& msgs, const std::vector<int>& per_request,
                   Window* w) {
  w->dst.resize(msgs.size());
  size_t k = 0;
  for (int n : per_request) {
    void* bufs[shm::kMaxRecvs];
    size_t caps[shm::kMaxRecvs];
    int tags[shm::kMaxRecvs];
    for (int i = 0; i < n; ++i, ++k) {
      w->dst[k].assign(msgs[k].size + 1, 0xee);
      bufs[i] = w->dst[k].data();
      caps[i] = msgs[k].size;
      tags[i] = msgs[k].tag;
    }
    void* req = nullptr;
    ASSERT_EQ(ops()->irecv(p.rc, n, bufs, caps, tags, nullptr, &req), ZCX_SUCCESS);
    ASSERT_NE(req, nullptr);
    w->recvs.push_back(req);
  }
}

// Sends the messages in `order` (indices into msgs).
void post_sends(Pair& p, const std::vector<Message>& msgs, const std::vector<size_t>& order,
                Window* w) {
  w->src.resize(msgs.size());
  for (size_t k : order) {
    w->src[k].resize(msgs[k].size);
    fill_pattern(w->src[k], static_cast<uint32_t>(1000 + k));
    void* req = nullptr;
    ASSERT_EQ(ops()->isend(p.sc, w->src[k].data(), msgs[k].size, msgs[k].tag, nullptr, &req),
              ZCX_SUCCESS);
    ASSERT_NE(req, nullptr);
    w->sends.push_back(req);
  }
}

void expect_intact(const std::vector<Message>& msgs, const Window& w) {
  for (size_t k = 0; k < msgs.size(); ++k) {
    EXPECT_EQ(first_diff(w.src[k], w.dst[k], msgs[k].size), -1) << "message " << k;
    EXPECT_EQ(w.dst[k][msgs[k].size], 0xee) << "message " << k << " overran its buffer";
  }
}

// One receive per message, the sends in message order, all tested together; data checked.
void exchange_in_order(Pair& p, const std::vector<Message>& msgs) {
  Window w;
  ASSERT_NO_FATAL_FAILURE(post_receives(p, msgs, std::vector<int>(msgs.size(), 1), &w));
  std::vector<size_t> order(msgs.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  ASSERT_NO_FATAL_FAILURE(post_sends(p, msgs, order, &w));
  std::vector<void*> all = w.sends;
  all.insert(all.end(), w.recvs.begin(), w.recvs.end());
  ASSERT_EQ(wait_all(all), ZCX_SUCCESS) << zcx::last_error();
  expect_intact(msgs, w);
}

TEST(ShmInterleave, MessagesInFlightShareTheStreamAndLandInTheirBuffers) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  // The first message fills the 2 MiB chunk ring, so the four pipelined ones behind it are
  // queued together and form one group; the inline one ends it.
  const std::vector<Message> msgs = {{4 * kMiB + 5, 1}, {300000, 2}, {70000, 3},
                                     {kMiB + 3, 4},     {262145, 5}, {100, 6}};
  Window w;
  ASSERT_NO_FATAL_FAILURE(post_receives(p, msgs, {1, 2, 1, 1, 1}, &w));
  // Tags 2 and 3 share a receive request and are sent in the other order.
  ASSERT_NO_FATAL_FAILURE(post_sends(p, msgs, {0, 2, 1, 3, 4, 5}, &w));
  std::vector<void*> all = w.recvs;
  all.insert(all.begin(), w.sends.rbegin(), w.sends.rend());  // last send tested first
  ASSERT_EQ(wait_all(all), ZCX_SUCCESS) << zcx::last_error();
  expect_intact(msgs, w);
  EXPECT_EQ(static_cast<shm::Comm*>(p.sc)->group.n, 4) << "the sender formed no group";
  EXPECT_EQ(static_cast<shm::Comm*>(p.rc)->group.n, 4) << "the receiver formed no group";
}

// A sender that interleaved a message whose receive is not posted would block the stream
// of the one before it; an application that posts the second receive only after the first
// completed would hang. The first message holds the stream while the other two queue.
TEST(ShmInterleave, AMessageWithoutAPostedReceiveIsNotInterleaved) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  const std::vector<Message> msgs = {{4 * kMiB + 1, 1}, {3 * kMiB + 7, 2}, {2 * kMiB + 3, 3}};
  Window w;
  ASSERT_NO_FATAL_FAILURE(post_receives(p, {msgs[0], msgs[1]}, {1, 1}, &w));
  ASSERT_NO_FATAL_FAILURE(post_sends(p, msgs, {0, 1, 2}, &w));
  std::vector<void*> first = {w.recvs[0], w.recvs[1], w.sends[0], w.sends[1]};
  ASSERT_EQ(wait_all(first, nullptr, 10000), ZCX_SUCCESS) << zcx::last_error();
  Window last;
  ASSERT_NO_FATAL_FAILURE(post_receives(p, {msgs[2]}, {1}, &last));
  std::vector<void*> rest = {last.recvs[0], w.sends[2]};
  ASSERT_EQ(wait_all(rest, nullptr, 10000), ZCX_SUCCESS) << zcx::last_error();
  for (size_t k = 0; k < 2; ++k) EXPECT_EQ(first_diff(w.src[k], w.dst[k], msgs[k].size), -1) << k;
  EXPECT_EQ(first_diff(w.src[2], last.dst[0], msgs[2].size), -1);
}

// Non-temporal copy-out (ZCX_SHM_NT_MIN) only for a group whose members write buffers of
// their own: members that share one rewrite its lines while they are in cache. A window of
// four receives into one buffer is written through the cache and ends holding the last
// message (the stream takes chunk k of every member in message order); the same window
// into four buffers streams.
TEST(ShmInterleave, OnlyAGroupWritingBuffersOfItsOwnStreams) {
  test::ScopedEnv nt_min("ZCX_SHM_NT_MIN", "1M");
  // The group of four needs the default ring (2 MiB), whatever the environment sets.
  test::ScopedEnv chunk("ZCX_SHM_CHUNK_BYTES", "256K"), chunks("ZCX_SHM_CHUNKS", "8");
  for (bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "one receive buffer" : "four receive buffers");
    Rank a(0), b(1);
    Pair p;
    ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
    // The first message fills the chunk ring, so the four behind it queue and form a group.
    const std::vector<Message> msgs = {{4 * kMiB + 5, 1}, {kMiB + 3, 2}, {kMiB + 3, 3},
                                       {kMiB + 3, 4},     {kMiB + 3, 5}};
    std::vector<std::vector<uint8_t>> dst(5);
    for (size_t k = 0; k < 5; ++k) dst[k].assign(msgs[k].size + 1, 0xee);
    Window w;
    for (size_t k = 0; k < 5; ++k) {
      void* buf = dst[shared && k > 0 ? 1 : k].data();
      size_t cap = msgs[k].size;
      int tag = msgs[k].tag;
      void* req = nullptr;
      ASSERT_EQ(ops()->irecv(p.rc, 1, &buf, &cap, &tag, nullptr, &req), ZCX_SUCCESS);
      w.recvs.push_back(req);
    }
    ASSERT_NO_FATAL_FAILURE(post_sends(p, msgs, {0, 1, 2, 3, 4}, &w));
    std::vector<void*> all = w.sends;
    all.insert(all.end(), w.recvs.begin(), w.recvs.end());
    ASSERT_EQ(wait_all(all), ZCX_SUCCESS) << zcx::last_error();
    const auto* rc = static_cast<shm::Comm*>(p.rc);
    ASSERT_EQ(rc->group.n, 4) << "the receiver formed no group";
    EXPECT_EQ(rc->group.streaming, !shared);
    for (size_t k = 0; k < 5; ++k) {
      if (shared && k > 0 && k < 4) continue;  // written over by message 4
      const auto& got = dst[shared && k > 0 ? 1 : k];
      EXPECT_EQ(first_diff(w.src[k], got, msgs[k].size), -1) << "message " << k;
      EXPECT_EQ(got[msgs[k].size], 0xee) << "message " << k << " overran its buffer";
    }
  }
}

// A group bound from the peer is checked against the receives posted here.
TEST(ShmInterleave, GroupBeyondThePostedReceivesIsDetected) {
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  auto* rc = static_cast<shm::Comm*>(p.rc);
  auto* slot = reinterpret_cast<shm::SlotHeader*>(rc->slots);
  slot->size = 100000;
  slot->tag = 0;
  slot->type = shm::kSlotPipe;
  slot->aux = 5;  // a group of five messages, one receive posted
  slot->seq.store(1, std::memory_order_release);
  std::vector<uint8_t> dst(100000);
  EXPECT_EQ(receive_once(p, dst), ZCX_ERR_PROTOCOL);
  EXPECT_NE(std::string(zcx::last_error()).find("interleave group bound"), std::string::npos)
      << zcx::last_error();
}

// ZCX_SHM_LARGE=auto above ZCX_SHM_ADAPT_MIN: the sender tries both the pipeline and CMA
// (then keeps the one whose copies ran faster); a window that mixes them lands intact.
TEST(ShmAdaptive, MixedCmaAndPipelinedMessagesLandIntact) {
  test::ScopedEnv adapt("ZCX_SHM_ADAPT_MIN", "65536");
  test::ScopedEnv large("ZCX_SHM_LARGE", "auto");
  Rank a(0), b(1);
  Pair p;
  ASSERT_EQ(p.make(a, b), ZCX_SUCCESS);
  std::vector<Message> msgs;
  for (int k = 0; k < 24; ++k) msgs.push_back({256 * 1024 + static_cast<size_t>(k) * 4096, k});
  ASSERT_NO_FATAL_FAILURE(exchange_in_order(p, msgs));
  const auto& rates = static_cast<shm::Comm*>(p.sc)->chooser.rate[2];  // 256-512 KiB
  if (!static_cast<shm::Comm*>(p.sc)->cma_ok) GTEST_SKIP() << "CMA is not permitted here";
  EXPECT_NE(rates[0].at_ns, 0) << "the pipeline was never measured";
  EXPECT_NE(rates[1].at_ns, 0) << "CMA was never tried";
}

// The cut tests reason about the default ring (8 x 256 KiB), whatever the environment.
class ShmCut : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(p.make(a, b), ZCX_SUCCESS); }
  shm::Comm* sender() { return static_cast<shm::Comm*>(p.sc); }
  test::ScopedEnv ring_bytes{"ZCX_SHM_CHUNK_BYTES", "262144"};
  test::ScopedEnv ring_count{"ZCX_SHM_CHUNKS", "8"};
  test::ScopedEnv stream{"ZCX_SHM_STREAM", "auto"};
  Rank a{0}, b{1};
  Pair p;
};

// ZCX_SHM_STREAM: a group cut the other way than the chunks still in the ring waits until
// the receiver has taken them all; both groups land intact.
TEST_F(ShmCut, ANewCutWaitsForTheRingToEmpty) {
  shm::Comm* sc = sender();
  ASSERT_NE(sc->layout.fine_nchunks, 0u) << "the default ring has no fine cut";
  const std::vector<Message> msgs = {{3 * kMiB / 2, 1}, {700000, 2}};
  Window w;
  ASSERT_NO_FATAL_FAILURE(post_receives(p, msgs, {1, 1}, &w));
  sc->cut = shm::StreamCut::kCoarse;
  ASSERT_NO_FATAL_FAILURE(post_sends(p, msgs, {0}, &w));
  std::vector<void*> first = {w.sends[0]};
  ASSERT_EQ(wait_all(first, nullptr, 10000), ZCX_SUCCESS) << "the coarse ring holds it all";
  const uint64_t head = sc->chunk_head;
  const uint64_t switches = sc->cuts.switches;
  sc->cut = shm::StreamCut::kFine;
  ASSERT_NO_FATAL_FAILURE(post_sends(p, msgs, {1}, &w));
  for (int i = 0; i < 100; ++i) {
    int done = 0;
    ASSERT_EQ(ops()->test(w.sends[1], &done, nullptr), ZCX_SUCCESS);
    ASSERT_EQ(done, 0);
  }
  EXPECT_EQ(sc->chunk_head, head) << "fine chunks went into a ring holding coarse ones";
  std::vector<void*> rest = {w.sends[1], w.recvs[0], w.recvs[1]};
  ASSERT_EQ(wait_all(rest), ZCX_SUCCESS) << zcx::last_error();
  expect_intact(msgs, w);
  EXPECT_EQ(sc->cuts.switches, switches + 1);
  EXPECT_TRUE(static_cast<shm::Comm*>(p.rc)->group.fine) << "the receiver took it coarse";
}

// ZCX_SHM_STREAM=auto: groups large enough to measure try each cut (coarse first, then the
// one measured longer ago) until it has three groups, then take the one with the higher
// median; while either is unknown a small group keeps the ring's cut.
TEST_F(ShmCut, AutoTriesBothCutsThenTakesTheFaster) {
  shm::Comm* c = sender();
  const size_t big = 64 * kMiB, small = 100000;
  EXPECT_FALSE(shm::cut_measurable(c, small));
  EXPECT_TRUE(shm::cut_measurable(c, big));
  bool trial = false;
  EXPECT_FALSE(shm::choose_fine(c, small, &trial));
  EXPECT_FALSE(trial);
  EXPECT_FALSE(shm::choose_fine(c, big, &trial)) << "coarse is measured first";
  EXPECT_TRUE(trial);
  EXPECT_TRUE(shm::choose_fine(c, big, &trial)) << "then fine";
  EXPECT_TRUE(trial);
  const int64_t now = now_ns();
  c->cuts.arm[0] = {{30, 31, 29}, 3, now, false};  // GB/s = bytes/ns
  c->cuts.arm[1] = {{75, 10, 76}, 3, now, false};  // one slow group does not turn it
  EXPECT_TRUE(shm::choose_fine(c, big, &trial));
  EXPECT_FALSE(trial);
  EXPECT_TRUE(shm::choose_fine(c, small, &trial));
  c->cuts.arm[1] = {{25, 26, 24}, 3, now, false};
  EXPECT_FALSE(shm::choose_fine(c, big, &trial));
  c->cuts.arm[1] = {{25}, 1, now, false};
  EXPECT_TRUE(shm::choose_fine(c, big, &trial)) << "a cut measured once is tried again";
  EXPECT_TRUE(trial);
  c->cuts.arm[1] = {{25, 26, 24}, 3, now - 1'000'000'000, false};
  EXPECT_TRUE(shm::choose_fine(c, big, &trial)) << "a cut unmeasured for a second is tried";
  EXPECT_TRUE(trial);
  EXPECT_FALSE(shm::choose_fine(c, small, &trial)) << "only a group that measures it";
  // Both due, the coarse record stale (groups 200 ms apart) yet newer than the fine one's:
  // the fine cut's turn, not coarse again.
  c->cuts.arm[0] = {{30}, 1, now - 200'000'000, false};
  c->cuts.arm[1] = {{}, 0, 0, false};
  EXPECT_TRUE(shm::choose_fine(c, big, &trial)) << "a stale coarse record starved the fine cut";
  EXPECT_TRUE(trial);
}

// End to end: windows of 1 MiB messages behind one that fills the ring form groups of 8 MiB,
// which measure both cuts in turn and land intact. (Under load, with groups more than 100 ms
// apart, the chooser once re-measured a stale coarse cut every time: with three copies of
// this test beside a full ctest, 33 of 120 runs never measured the fine cut; 0 of 120 since.)
TEST_F(ShmCut, WindowsThatFillTheRingMeasureBothCuts) {
  sender()->large = shm::LargeMode::kPipeline;  // the 4 MiB message must fill the ring
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    std::vector<Message> msgs = {{4 * kMiB + 5, 100}};
    for (int k = 0; k < 8; ++k) msgs.push_back({kMiB + size_t(round) * 4096 + size_t(k), k});
    ASSERT_NO_FATAL_FAILURE(exchange_in_order(p, msgs));
  }
  const shm::Comm* c = sender();
  EXPECT_GT(c->cuts.arm[0].count, 0) << "the coarse cut was never measured";
  EXPECT_GT(c->cuts.arm[1].count, 0) << "the fine cut was never measured";
  EXPECT_GE(c->cuts.switches, 1u);
}

}  // namespace
}  // namespace zcx::shm_test
