// The tcp provider inside one process: two contexts (ranks 0 and 1) whose state machines
// this thread drives alternately. Covers set-up, data integrity, grouped receives, many
// requests in flight, truncation, peer close and timeouts.
#include "base/registry.h"
#include "common/clock.h"
#include "common/config.h"
#include "tcp/tcp.h"
#include "transport/provider_util.h"
#include "transport/tcp_two_ranks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace zcx::test {
namespace {

class TcpInProcess : public TcpTwoRanks {
 protected:
  void SetUp() override {
    TcpTwoRanks::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(connect_pair(a_, b_, &send_, &recv_), ZCX_SUCCESS) << zcx_get_last_error();
  }
  void TearDown() override {
    if (send_) {
      EXPECT_EQ(ops_->close_send(send_), ZCX_SUCCESS);
    }
    if (recv_) {
      EXPECT_EQ(ops_->close_recv(recv_), ZCX_SUCCESS);
    }
  }
  // One message a -> b of `size` bytes, verified byte by byte.
  void transfer(size_t size) {
    std::vector<uint8_t> src(size), dst(size + 1, 0xee);
    fill_pattern(src.data(), size, 0);
    void *sreq, *rreq;
    void* rbuf = dst.data();
    size_t cap = size + 1;
    int tag = 7;
    ASSERT_EQ(post_recv(ops_, recv_, 1, &rbuf, &cap, &tag, nullptr, &rreq), ZCX_SUCCESS);
    ASSERT_EQ(post_send(ops_, send_, src.data(), size, 7, nullptr, &sreq), ZCX_SUCCESS);
    std::vector<void*> reqs{rreq, sreq};
    std::vector<size_t> sizes;
    ASSERT_EQ(wait_requests(ops_, reqs, &sizes), ZCX_SUCCESS) << zcx_get_last_error();
    EXPECT_EQ(sizes[0], size);
    EXPECT_EQ(sizes[1], size);
    EXPECT_EQ(check_pattern(dst.data(), size, 0), "");
    EXPECT_EQ(dst[size], 0xee) << "wrote past the message";
  }

  // `count` messages of up to 20000 bytes in flight at once, each verified; waited for in
  // reverse order.
  void many_in_flight(int count) {
    std::vector<std::vector<uint8_t>> src(count), dst(count);
    std::vector<void*> reqs;
    for (int i = 0; i < count; ++i) {
      size_t size = (static_cast<size_t>(i) * 7919) % 20000;
      src[i].resize(size);
      fill_pattern(src[i].data(), size, i);
      dst[i].assign(20000, 0);
      void* buf = dst[i].data();
      size_t cap = dst[i].size();
      int tag = i;
      void *r, *s;
      ASSERT_EQ(post_recv(ops_, recv_, 1, &buf, &cap, &tag, nullptr, &r), ZCX_SUCCESS);
      ASSERT_EQ(post_send(ops_, send_, src[i].data(), size, i, nullptr, &s), ZCX_SUCCESS);
      reqs.push_back(r);
      reqs.push_back(s);
    }
    std::reverse(reqs.begin(), reqs.end());
    ASSERT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
    for (int i = 0; i < count; ++i)
      EXPECT_EQ(check_pattern(dst[i].data(), src[i].size(), i), "");
  }

  void* send_ = nullptr;
  void* recv_ = nullptr;
};

TEST_F(TcpInProcess, PropertiesDescribeTheInterface) {
  zcx_device_props_t p{};
  int ndev = 0;
  ASSERT_EQ(ops_->devices(a_.ctx, &ndev), ZCX_SUCCESS);
  ASSERT_EQ(ndev, 1);
  ASSERT_EQ(ops_->get_properties(a_.ctx, 0, &p), ZCX_SUCCESS);
  EXPECT_STRNE(p.name, "");
  EXPECT_GT(p.speed_mbps, 0);
  EXPECT_GE(p.max_requests, 256);
  EXPECT_EQ(p.max_recvs, 8);
  EXPECT_EQ(p.mem_kinds, static_cast<uint32_t>(ZCX_MEM_HOST));
}

TEST_F(TcpInProcess, PeerInfoNamesBothSides) {
  zcx_peer_info_t s{}, r{};
  ASSERT_EQ(ops_->peer_info(send_, &s), ZCX_SUCCESS);
  ASSERT_EQ(ops_->peer_info(recv_, &r), ZCX_SUCCESS);
  EXPECT_EQ(s.rank, 1);  // the send comm's peer is the acceptor
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.pid, static_cast<int>(getpid()));
}

TEST_F(TcpInProcess, SizesAreDeliveredIntact) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{65536}, size_t{65537},
                      (size_t{1} << 20) + 3, size_t{64} << 20}) {
    SCOPED_TRACE(size);
    transfer(size);
  }
}

TEST_F(TcpInProcess, GroupedReceiveMatchesByTag) {
  for (int n = 2; n <= 8; ++n) {
    SCOPED_TRACE(n);
    std::vector<std::vector<uint8_t>> src(n), dst(n);
    std::vector<void*> rbufs(n);
    std::vector<size_t> caps(n);
    std::vector<int> tags(n);
    for (int i = 0; i < n; ++i) {
      size_t size = 1000 * static_cast<size_t>(i) + (i % 2 ? 300000 : 17);
      src[i].resize(size);
      fill_pattern(src[i].data(), size, i);
      dst[i].assign(size + 64, 0);
      rbufs[i] = dst[i].data();
      caps[i] = dst[i].size();
      tags[i] = 100 + i;
    }
    void* rreq;
    ASSERT_EQ(post_recv(ops_, recv_, n, rbufs.data(), caps.data(), tags.data(), nullptr, &rreq),
              ZCX_SUCCESS);
    std::vector<void*> reqs;
    for (int k = n - 1; k >= 0; --k) {  // sent in reverse tag order
      void* s;
      ASSERT_EQ(post_send(ops_, send_, src[k].data(), src[k].size(), 100 + k, nullptr, &s),
                ZCX_SUCCESS);
      reqs.push_back(s);
    }
    ASSERT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
    int done = 0;
    size_t sizes[8] = {};
    Deadline dl = Deadline::after_ms(10000);
    while (!done && !dl.expired()) ASSERT_EQ(ops_->test(rreq, &done, sizes), ZCX_SUCCESS);
    ASSERT_TRUE(done);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(sizes[i], src[i].size());
      EXPECT_EQ(check_pattern(dst[i].data(), src[i].size(), i), "");
    }
  }
}

TEST_F(TcpInProcess, ManyRequestsInFlightCompleteInAnyOrder) { many_in_flight(300); }

// One test() call moves a bounded amount (tcp_progress.cc: 2 MiB per socket) however much
// the socket holds: a peer that keeps the socket full must not keep the caller inside one
// call until its whole message is through. Between receiver calls the sender fills what
// the kernel takes (several MiB once loopback's buffers have grown); the bytes that landed
// are counted after each call (the source has no zero byte).
TEST_F(TcpInProcess, OneTestCallMovesABoundedAmount) {
  constexpr size_t kSize = size_t{48} << 20, kBound = (size_t{2} << 20) + (size_t{256} << 10);
  std::vector<uint8_t> src(kSize, 0x5a), dst(kSize, 0);
  void* rbuf = dst.data();
  size_t cap = kSize;
  int tag = 3, rdone = 0, sdone = 0, calls = 0;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(post_recv(ops_, recv_, 1, &rbuf, &cap, &tag, nullptr, &rreq), ZCX_SUCCESS);
  ASSERT_EQ(post_send(ops_, send_, src.data(), kSize, 3, nullptr, &sreq), ZCX_SUCCESS);
  size_t landed = 0, most = 0;
  Deadline dl = Deadline::after_ms(60000);
  while (!rdone && !dl.expired()) {
    for (int i = 0; i < 64 && !sdone; ++i)
      ASSERT_EQ(ops_->test(sreq, &sdone, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
    ASSERT_EQ(ops_->test(rreq, &rdone, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
    ++calls;
    const size_t now = kSize - static_cast<size_t>(std::count(dst.begin(), dst.end(), 0));
    most = std::max(most, now - landed);
    landed = now;
  }
  ASSERT_TRUE(rdone) << "not received within 60 s; " << landed << " bytes landed";
  while (!sdone) ASSERT_EQ(ops_->test(sreq, &sdone, nullptr), ZCX_SUCCESS);
  EXPECT_EQ(landed, kSize);
  EXPECT_LE(most, kBound) << "one receiver test() moved " << most << " bytes (" << calls
                          << " calls in all)";
  printf("[budget] most %zu bytes in one call, %d receiver calls\n", most, calls);
}

TEST_F(TcpInProcess, PoolExhaustionSaysRetryLater) {
  std::vector<void*> reqs;
  uint8_t byte = 1;
  void* r = nullptr;
  int posted = 0;
  do {
    ASSERT_EQ(ops_->isend(send_, &byte, 1, 0, nullptr, &r), ZCX_SUCCESS);
    if (r) reqs.push_back(r), ++posted;
  } while (r != nullptr && posted < 100000);
  EXPECT_GE(posted, 256);
  EXPECT_LT(posted, 100000);
  // Closing with requests in flight is allowed (TearDown).
}

TEST_F(TcpInProcess, MessagesSentBeforeReceivesArePostedStayInOrder) {
  // Small messages pile up in the socket (and zcx's staging) before any receive exists;
  // a large one in the middle crosses the staged bytes into direct reads.
  std::vector<size_t> sizes{0, 1, 24, 3000, 17, 700000, 5, 65536, 65537, 9};
  std::vector<std::vector<uint8_t>> src(sizes.size());
  std::vector<void*> sends;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src[i].resize(sizes[i]);
    fill_pattern(src[i].data(), sizes[i], static_cast<int>(i));
    void* s;
    ASSERT_EQ(post_send(ops_, send_, src[i].data(), sizes[i], static_cast<int>(i), nullptr, &s),
              ZCX_SUCCESS);
    sends.push_back(s);
  }
  for (int k = 0; k < 50; ++k)  // let the small ones reach the receiver's socket
    for (void*& s : sends) {
      int done = 0;
      if (s == nullptr) continue;
      ASSERT_EQ(ops_->test(s, &done, nullptr), ZCX_SUCCESS);
      if (done) s = nullptr;
    }
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<uint8_t> dst(sizes[i] + 8, 0);
    void* buf = dst.data();
    size_t cap = dst.size();
    int tag = static_cast<int>(i);
    void* r;
    ASSERT_EQ(post_recv(ops_, recv_, 1, &buf, &cap, &tag, nullptr, &r), ZCX_SUCCESS);
    std::vector<void*> reqs{r};
    reqs.insert(reqs.end(), sends.begin(), sends.end());
    std::vector<size_t> got;
    ASSERT_EQ(wait_requests(ops_, reqs, &got), ZCX_SUCCESS) << zcx_get_last_error();
    sends.assign(reqs.begin() + 1, reqs.end());
    EXPECT_EQ(got[0], sizes[i]);
    EXPECT_EQ(check_pattern(dst.data(), sizes[i], static_cast<int>(i)), "") << "message " << i;
  }
}

TEST_F(TcpInProcess, TagMatchingNoBufferIsAnError) {
  std::vector<uint8_t> src(10), dst(10);
  void* bufs[2] = {dst.data(), dst.data()};
  size_t caps[2] = {5, 5};
  int tags[2] = {1, 2};
  void *r, *s;
  ASSERT_EQ(post_recv(ops_, recv_, 2, bufs, caps, tags, nullptr, &r), ZCX_SUCCESS);
  ASSERT_EQ(post_send(ops_, send_, src.data(), 3, 99, nullptr, &s), ZCX_SUCCESS);
  std::vector<void*> reqs{s, r};
  EXPECT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_ERR_INVALID_USAGE);
  EXPECT_NE(std::string(zcx_get_last_error()).find("tag 99"), std::string::npos);
}

TEST_F(TcpInProcess, TruncationIsAnErrorNamingThePeer) {
  std::vector<uint8_t> src(100), dst(50);
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  void *r, *s;
  ASSERT_EQ(post_recv(ops_, recv_, 1, &buf, &cap, &tag, nullptr, &r), ZCX_SUCCESS);
  ASSERT_EQ(post_send(ops_, send_, src.data(), src.size(), 0, nullptr, &s), ZCX_SUCCESS);
  std::vector<void*> reqs{s, r};
  EXPECT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_ERR_INVALID_USAGE);
  EXPECT_NE(std::string(zcx_get_last_error()).find("truncated"), std::string::npos);
  EXPECT_NE(std::string(zcx_get_last_error()).find("rank 0"), std::string::npos);
}

// A receive that completes in the same progress call as a later message that fails the
// comm still reports done (with its data); the failure goes to the next request tested.
TEST_F(TcpInProcess, AReceiveDoneBeforeALaterFailureStillReportsDone) {
  std::vector<uint8_t> first(10, 7), second(100, 8), dst_a(10), dst_b(5);
  void* bufs[2] = {dst_a.data(), dst_b.data()};
  size_t caps[2] = {dst_a.size(), dst_b.size()};
  int tag = 0;
  void *ra, *rb, *s1, *s2;
  ASSERT_EQ(post_recv(ops_, recv_, 1, &bufs[0], &caps[0], &tag, nullptr, &ra), ZCX_SUCCESS);
  ASSERT_EQ(post_recv(ops_, recv_, 1, &bufs[1], &caps[1], &tag, nullptr, &rb), ZCX_SUCCESS);
  ASSERT_EQ(post_send(ops_, send_, first.data(), first.size(), 0, nullptr, &s1), ZCX_SUCCESS);
  ASSERT_EQ(post_send(ops_, send_, second.data(), second.size(), 0, nullptr, &s2), ZCX_SUCCESS);
  std::vector<void*> sends{s1, s2};
  ASSERT_EQ(wait_requests(ops_, sends, nullptr), ZCX_SUCCESS);  // both are in the socket now
  int done = 0;
  size_t got = 0;
  ASSERT_EQ(ops_->test(ra, &done, &got), ZCX_SUCCESS) << zcx_get_last_error();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(got, first.size());
  EXPECT_EQ(dst_a, first);
  std::vector<void*> reqs{rb};
  EXPECT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_ERR_INVALID_USAGE);
  EXPECT_NE(std::string(zcx_get_last_error()).find("truncated"), std::string::npos);
}

TEST_F(TcpInProcess, PeerCloseFailsPendingReceive) {
  std::vector<uint8_t> dst(4096);
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  void* r;
  ASSERT_EQ(post_recv(ops_, recv_, 1, &buf, &cap, &tag, nullptr, &r), ZCX_SUCCESS);
  ASSERT_EQ(ops_->close_send(send_), ZCX_SUCCESS);
  send_ = nullptr;
  std::vector<void*> reqs{r};
  int64_t t0 = now_ms();
  EXPECT_EQ(wait_requests(ops_, reqs, nullptr, 5000), ZCX_ERR_REMOTE);
  EXPECT_LT(now_ms() - t0, 1000);
  EXPECT_NE(std::string(zcx_get_last_error()).find("rank 0"), std::string::npos);
}

TEST_F(TcpInProcess, SilentPeerTimesOut) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "0.3");  // read when a comm is made
  ASSERT_EQ(ops_->close_send(send_), ZCX_SUCCESS);
  ASSERT_EQ(ops_->close_recv(recv_), ZCX_SUCCESS);
  ASSERT_EQ(connect_pair(a_, b_, &send_, &recv_), ZCX_SUCCESS) << zcx_get_last_error();
  std::vector<uint8_t> dst(16);
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  void* r;
  ASSERT_EQ(post_recv(ops_, recv_, 1, &buf, &cap, &tag, nullptr, &r), ZCX_SUCCESS);
  std::vector<void*> reqs{r};
  int64_t t0 = now_ms();
  EXPECT_EQ(wait_requests(ops_, reqs, nullptr, 5000), ZCX_ERR_TIMEOUT);
  EXPECT_GE(now_ms() - t0, 250);
  EXPECT_NE(std::string(zcx_get_last_error()).find("rank 0"), std::string::npos);
}

TEST_F(TcpInProcess, CloseWithReceivesInFlight) {
  std::vector<uint8_t> dst(1 << 20);
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  for (int i = 0; i < 10; ++i) {
    void* r;
    ASSERT_EQ(post_recv(ops_, recv_, 1, &buf, &cap, &tag, nullptr, &r), ZCX_SUCCESS);
  }
  EXPECT_EQ(ops_->close_recv(recv_), ZCX_SUCCESS);
  recv_ = nullptr;
}

TEST_F(TcpInProcess, StripingWorksForEverySocketCountAndChunk) {
  for (const char* nsocks : {"1", "3", "8"}) {
    for (const char* chunk : {"4096", "65536"}) {
      config::ScopedOverride ns("ZCX_TCP_NSOCKS", nsocks);
      config::ScopedOverride ch("ZCX_TCP_CHUNK", chunk);
      config::ScopedOverride in("ZCX_TCP_INLINE", "1024");
      SCOPED_TRACE(std::string(nsocks) + " sockets, chunk " + chunk);
      ASSERT_EQ(ops_->close_send(send_), ZCX_SUCCESS);
      ASSERT_EQ(ops_->close_recv(recv_), ZCX_SUCCESS);
      ASSERT_EQ(connect_pair(a_, b_, &send_, &recv_), ZCX_SUCCESS) << zcx_get_last_error();
      for (size_t size : {size_t{1024}, size_t{1025}, size_t{8191}, size_t{300001}})
        transfer(size);
    }
  }
}

// Sends to a peer on this host go to the kernel in pieces of at most ZCX_TCP_SEND_MAX bytes
// (160K by default, tcp_config.cc); any bound, even one shorter than a header, keeps every
// message intact, small batched ones included.
TEST_F(TcpInProcess, SendsToThisHostGoInBoundedPieces) {
  EXPECT_EQ(static_cast<tcp::Comm*>(send_)->send_max, size_t{160} * 1024);
  for (const char* bound : {"10", "4097"}) {
    for (const char* nsocks : {"1", "3"}) {
      config::ScopedOverride sm("ZCX_TCP_SEND_MAX", bound);
      config::ScopedOverride ns("ZCX_TCP_NSOCKS", nsocks);
      SCOPED_TRACE(std::string("bound ") + bound + ", " + nsocks + " sockets");
      ASSERT_EQ(ops_->close_send(send_), ZCX_SUCCESS);
      ASSERT_EQ(ops_->close_recv(recv_), ZCX_SUCCESS);
      ASSERT_EQ(connect_pair(a_, b_, &send_, &recv_), ZCX_SUCCESS) << zcx_get_last_error();
      EXPECT_EQ(static_cast<tcp::Comm*>(send_)->send_max, std::stoul(bound));
      for (size_t size : {size_t{0}, size_t{9}, size_t{4097}, size_t{300001}}) transfer(size);
      many_in_flight(40);
    }
  }
}

TEST(TcpInterface, SocketIfnamePicksTheInterface) {
  config::ScopedOverride ifname("ZCX_SOCKET_IFNAME", "=lo");
  const zcx_provider_ops_t* ops = provider_find("tcp");
  ASSERT_NE(ops, nullptr);
  ProviderCtx a, b;
  ASSERT_EQ(a.init(ops, 0, 2, 1), ZCX_SUCCESS) << zcx_get_last_error();
  ASSERT_EQ(b.init(ops, 1, 2, 1), ZCX_SUCCESS) << zcx_get_last_error();
  zcx_device_props_t p{};
  ASSERT_EQ(ops->get_properties(a.ctx, 0, &p), ZCX_SUCCESS);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.speed_mbps, 10000);  // loopback has no sysfs speed: the documented fallback
  void *send, *recv;
  ASSERT_EQ(connect_pair(a, b, &send, &recv), ZCX_SUCCESS) << zcx_get_last_error();
  EXPECT_EQ(ops->close_send(send), ZCX_SUCCESS);
  EXPECT_EQ(ops->close_recv(recv), ZCX_SUCCESS);
}

TEST(TcpInterface, UnknownInterfaceMeansZeroDevices) {
  config::ScopedOverride ifname("ZCX_SOCKET_IFNAME", "=nosuchif0");
  const zcx_provider_ops_t* ops = provider_find("tcp");
  ASSERT_NE(ops, nullptr);
  ProviderCtx a;
  ASSERT_EQ(a.init(ops, 0, 2, 1), ZCX_SUCCESS);  // 0 devices is not an error
  int ndev = -1;
  ASSERT_EQ(ops->devices(a.ctx, &ndev), ZCX_SUCCESS);
  EXPECT_EQ(ndev, 0);
  char handle[ZCX_HANDLE_BYTES];
  void* listen = nullptr;
  EXPECT_EQ(ops->listen(a.ctx, 0, handle, &listen), ZCX_ERR_NO_DEVICE);
  EXPECT_NE(std::string(zcx_get_last_error()).find("ZCX_SOCKET_IFNAME"), std::string::npos);
}

}  // namespace
}  // namespace zcx::test
