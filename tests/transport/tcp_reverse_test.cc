// The tcp provider's duplex connections inside one process: rank 1 sends back over the
// connection rank 0 made (connect_reverse / accept_reverse). Both directions at once, every
// size and socket count, data that follows the reverse hello at once, one direction closed
// while the other goes on, a second reverse refused, and a forged or missing reverse hello.
#include "base/registry.h"
#include "common/clock.h"
#include "common/config.h"
#include "tcp/tcp.h"
#include "transport/provider_util.h"
#include "transport/tcp_two_ranks.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace zcx::test {
namespace {

class TcpReverse : public TcpTwoRanks {
 protected:
  // One data socket, as the forged hellos below declare, whatever the environment sets.
  config::ScopedOverride nsocks_{"ZCX_TCP_NSOCKS", "1"};
  void SetUp() override {
    TcpTwoRanks::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_NE(ops_->connect_reverse, nullptr);
    ASSERT_NE(ops_->accept_reverse, nullptr);
    open_pair();
  }
  void TearDown() override {
    if (ops_) close_all();
  }

  void open_pair() {
    ASSERT_EQ(connect_pair(a_, b_, &ab_send_, &ab_recv_), ZCX_SUCCESS) << zcx_get_last_error();
    ASSERT_EQ(reverse(), ZCX_SUCCESS) << zcx_get_last_error();
  }
  // b's connect_reverse and a's accept_reverse, driven in turn from this thread.
  zcx_status_t reverse() {
    int64_t until = now_ms() + 10000;
    while (ba_send_ == nullptr || ba_recv_ == nullptr) {
      zcx_status_t rc = ZCX_SUCCESS;
      if (ba_send_ == nullptr) rc = ops_->connect_reverse(ab_recv_, &ba_send_);
      if (rc == ZCX_SUCCESS && ba_recv_ == nullptr)
        rc = ops_->accept_reverse(ab_send_, &ba_recv_);
      if (rc != ZCX_SUCCESS) return rc;
      if (now_ms() > until) return ZCX_ERR_TIMEOUT;
    }
    return ZCX_SUCCESS;
  }
  void close_all() {
    for (void** s : {&ab_send_, &ba_send_}) {
      if (*s) {
        EXPECT_EQ(ops_->close_send(*s), ZCX_SUCCESS);
      }
    }
    for (void** r : {&ab_recv_, &ba_recv_}) {
      if (*r) {
        EXPECT_EQ(ops_->close_recv(*r), ZCX_SUCCESS);
      }
    }
    ab_send_ = ab_recv_ = ba_send_ = ba_recv_ = nullptr;
  }

  // Posts a receive of up to size + 1 bytes on recv and a send of `size` pattern bytes on
  // send (pattern of `rank`); the caller waits.
  void post(void* send, void* recv, size_t size, int rank, std::vector<uint8_t>* src,
            std::vector<uint8_t>* dst, std::vector<void*>* reqs) {
    src->resize(size);
    dst->assign(size + 1, 0xee);
    fill_pattern(src->data(), size, rank);
    void* rbuf = dst->data();
    size_t cap = size + 1;
    int tag = 3;
    void *rreq = nullptr, *sreq = nullptr;
    ASSERT_EQ(post_recv(ops_, recv, 1, &rbuf, &cap, &tag, nullptr, &rreq), ZCX_SUCCESS);
    ASSERT_EQ(post_send(ops_, send, src->data(), size, 3, nullptr, &sreq), ZCX_SUCCESS);
    reqs->push_back(rreq);
    reqs->push_back(sreq);
  }

  // One message each way at once, both verified.
  void exchange(size_t size) {
    std::vector<uint8_t> s0, d1, s1, d0;
    std::vector<void*> reqs;
    post(ab_send_, ab_recv_, size, 0, &s0, &d1, &reqs);
    post(ba_send_, ba_recv_, size, 1, &s1, &d0, &reqs);
    std::vector<size_t> sizes;
    ASSERT_EQ(wait_requests(ops_, reqs, &sizes), ZCX_SUCCESS) << zcx_get_last_error();
    EXPECT_EQ(sizes[0], size);
    EXPECT_EQ(sizes[2], size);
    EXPECT_EQ(check_pattern(d1.data(), size, 0), "") << "a -> b";
    EXPECT_EQ(check_pattern(d0.data(), size, 1), "") << "b -> a";
    EXPECT_EQ(d1[size], 0xee);
    EXPECT_EQ(d0[size], 0xee);
  }

  int fd0(void* comm) { return static_cast<tcp::Comm*>(comm)->socks[0].fd.get(); }

  void* ab_send_ = nullptr;  // a's connection to b ...
  void* ab_recv_ = nullptr;  // ... as b accepted it
  void* ba_send_ = nullptr;  // b's reverse over it ...
  void* ba_recv_ = nullptr;  // ... as a accepted it
};

TEST_F(TcpReverse, PeerInfoOfTheReverseComms) {
  zcx_peer_info_t s{}, r{};
  ASSERT_EQ(ops_->peer_info(ba_send_, &s), ZCX_SUCCESS);
  ASSERT_EQ(ops_->peer_info(ba_recv_, &r), ZCX_SUCCESS);
  EXPECT_EQ(s.rank, 0);  // b sends back to a
  EXPECT_EQ(r.rank, 1);  // a receives from b
  EXPECT_EQ(r.pid, static_cast<int>(getpid()));
}

TEST_F(TcpReverse, BothDirectionsAtOnceEverySizeAndSocketCount) {
  for (const char* nsocks : {"1", "3"}) {
    config::ScopedOverride ns("ZCX_TCP_NSOCKS", nsocks);
    config::ScopedOverride ch("ZCX_TCP_CHUNK", "4096");
    config::ScopedOverride in("ZCX_TCP_INLINE", "1024");
    SCOPED_TRACE(std::string(nsocks) + " sockets");
    close_all();
    open_pair();
    for (size_t size : {size_t{0}, size_t{8}, size_t{1024}, size_t{1025}, size_t{65537},
                        (size_t{1} << 20) + 3, size_t{16} << 20})
      exchange(size);
  }
}

TEST_F(TcpReverse, MessagesRightBehindTheReverseHelloAreKept) {
  close_all();
  ASSERT_EQ(connect_pair(a_, b_, &ab_send_, &ab_recv_), ZCX_SUCCESS);
  while (ba_send_ == nullptr) ASSERT_EQ(ops_->connect_reverse(ab_recv_, &ba_send_), ZCX_SUCCESS);
  std::vector<std::vector<uint8_t>> src(3);
  std::vector<void*> sreqs;
  for (size_t i = 0; i < src.size(); ++i) {  // sent before a has read the reverse hello
    src[i].resize(100 + i);
    fill_pattern(src[i].data(), src[i].size(), 1);
    void* req = nullptr;
    ASSERT_EQ(post_send(ops_, ba_send_, src[i].data(), src[i].size(), 0, nullptr, &req),
              ZCX_SUCCESS);
    sreqs.push_back(req);
  }
  ASSERT_EQ(wait_requests(ops_, sreqs, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
  usleep(20000);  // the hello and all three messages now sit in one receive queue
  int64_t until = now_ms() + 10000;
  while (ba_recv_ == nullptr && now_ms() < until)
    ASSERT_EQ(ops_->accept_reverse(ab_send_, &ba_recv_), ZCX_SUCCESS) << zcx_get_last_error();
  ASSERT_NE(ba_recv_, nullptr);
  for (size_t i = 0; i < src.size(); ++i) {
    std::vector<uint8_t> dst(200, 0);
    void* buf = dst.data();
    size_t cap = dst.size();
    int tag = 0;
    std::vector<void*> reqs(1);
    ASSERT_EQ(post_recv(ops_, ba_recv_, 1, &buf, &cap, &tag, nullptr, &reqs[0]), ZCX_SUCCESS);
    std::vector<size_t> sizes;
    ASSERT_EQ(wait_requests(ops_, reqs, &sizes), ZCX_SUCCESS) << zcx_get_last_error();
    EXPECT_EQ(sizes[0], src[i].size());
    EXPECT_EQ(check_pattern(dst.data(), src[i].size(), 1), "") << "message " << i;
  }
}

TEST_F(TcpReverse, ClosingOneDirectionLeavesTheOther) {
  ASSERT_EQ(ops_->close_recv(ba_recv_), ZCX_SUCCESS);  // a stops receiving from b
  ASSERT_EQ(ops_->close_send(ba_send_), ZCX_SUCCESS);
  ba_recv_ = ba_send_ = nullptr;
  std::vector<uint8_t> s, d;
  std::vector<void*> reqs;
  post(ab_send_, ab_recv_, 300001, 0, &s, &d, &reqs);
  ASSERT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
  EXPECT_EQ(check_pattern(d.data(), s.size(), 0), "");

  close_all();
  open_pair();
  ASSERT_EQ(ops_->close_send(ab_send_), ZCX_SUCCESS);  // a stops sending to b
  ASSERT_EQ(ops_->close_recv(ab_recv_), ZCX_SUCCESS);
  ab_send_ = ab_recv_ = nullptr;
  reqs.clear();
  post(ba_send_, ba_recv_, 300001, 1, &s, &d, &reqs);
  ASSERT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
  EXPECT_EQ(check_pattern(d.data(), s.size(), 1), "");
}

TEST_F(TcpReverse, PeerGoneFailsTheReverseReceive) {
  std::vector<uint8_t> dst(64);
  void* buf = dst.data();
  size_t cap = dst.size();
  int tag = 0;
  std::vector<void*> reqs(1);
  ASSERT_EQ(post_recv(ops_, ba_recv_, 1, &buf, &cap, &tag, nullptr, &reqs[0]), ZCX_SUCCESS);
  ASSERT_EQ(ops_->close_send(ba_send_), ZCX_SUCCESS);  // b goes away: both of its comms
  ASSERT_EQ(ops_->close_recv(ab_recv_), ZCX_SUCCESS);
  ba_send_ = ab_recv_ = nullptr;
  int64_t t0 = now_ms();
  EXPECT_EQ(wait_requests(ops_, reqs, nullptr, 5000), ZCX_ERR_REMOTE);
  EXPECT_LT(now_ms() - t0, 1000);
  EXPECT_NE(std::string(zcx_get_last_error()).find("rank 1"), std::string::npos)
      << zcx_get_last_error();
}

TEST_F(TcpReverse, SecondReverseIsRefused) {
  void* extra = nullptr;
  EXPECT_EQ(ops_->connect_reverse(ab_recv_, &extra), ZCX_ERR_INVALID_USAGE);
  EXPECT_EQ(extra, nullptr);
  EXPECT_EQ(ops_->accept_reverse(ab_send_, &extra), ZCX_ERR_INVALID_USAGE);
  EXPECT_EQ(extra, nullptr);
  EXPECT_EQ(ops_->connect_reverse(ab_send_, &extra), ZCX_ERR_INVALID_ARG);  // wrong kind
  EXPECT_EQ(ops_->accept_reverse(ab_recv_, &extra), ZCX_ERR_INVALID_ARG);
  EXPECT_EQ(ops_->connect_reverse(nullptr, &extra), ZCX_ERR_INVALID_ARG);
  EXPECT_EQ(ops_->accept_reverse(ab_send_, nullptr), ZCX_ERR_INVALID_ARG);
  exchange(4096);  // the pair still works
}

// Bytes written straight into b's side of the socket stand for a forged reverse hello.
class TcpReverseForged : public TcpReverse {
 protected:
  void SetUp() override {
    TcpReverse::SetUp();
    close_all();
    ASSERT_EQ(connect_pair(a_, b_, &ab_send_, &ab_recv_), ZCX_SUCCESS);
  }
  zcx_status_t accept_after(const std::vector<uint8_t>& bytes, bool then_close) {
    EXPECT_EQ(send(fd0(ab_recv_), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
    if (then_close) {
      EXPECT_EQ(ops_->close_recv(ab_recv_), ZCX_SUCCESS);
      ab_recv_ = nullptr;
    }
    int64_t until = now_ms() + 5000;
    while (now_ms() < until) {
      zcx_status_t rc = ops_->accept_reverse(ab_send_, &ba_recv_);
      if (rc != ZCX_SUCCESS || ba_recv_ != nullptr) return rc;
    }
    return ZCX_ERR_TIMEOUT;
  }
  // A well-formed reverse hello from rank 1 of this process, then `edit` applied.
  std::vector<uint8_t> hello(uint32_t magic, uint64_t secret, uint8_t nsocks) {
    std::vector<uint8_t> h(tcp::kHelloBytes, 0);
    wire::Writer w(h.data(), h.size());
    w.u32(magic);
    w.u16(tcp::kWireVersion);
    w.u8(nsocks);
    w.u8(0);
    w.u64(secret);
    w.u32(1);
    w.u32(static_cast<uint32_t>(getpid()));
    w.u64(1024);
    w.u64(65536);
    return h;
  }
  void expect_error(zcx_status_t rc, zcx_status_t want, const char* words) {
    EXPECT_EQ(rc, want);
    EXPECT_EQ(ba_recv_, nullptr);
    EXPECT_NE(std::string(zcx_get_last_error()).find(words), std::string::npos)
        << zcx_get_last_error();
    EXPECT_NE(std::string(zcx_get_last_error()).find("rank 1"), std::string::npos);
    // The connection is unusable after a bad hello: its send comm fails from now on.
    std::vector<uint8_t> one(1);
    void* req = nullptr;
    EXPECT_NE(ops_->isend(ab_send_, one.data(), 1, 0, nullptr, &req), ZCX_SUCCESS);
  }
};

TEST_F(TcpReverseForged, WellFormedHelloIsAccepted) {
  ASSERT_EQ(accept_after(hello(tcp::kReverseMagic, kSecret, 1), false), ZCX_SUCCESS)
      << zcx_get_last_error();
  EXPECT_NE(ba_recv_, nullptr);  // the forgery helper itself writes a valid hello
}

TEST_F(TcpReverseForged, WrongSecretIsRejected) {
  expect_error(accept_after(hello(tcp::kReverseMagic, kSecret ^ 1, 1), false),
               ZCX_ERR_PROTOCOL, "wrong job secret");
}

TEST_F(TcpReverseForged, WrongMagicIsRejected) {
  expect_error(accept_after(hello(tcp::kMsgMagic, kSecret, 1), false), ZCX_ERR_PROTOCOL,
               "wrong magic");
}

TEST_F(TcpReverseForged, WrongSocketCountIsRejected) {
  expect_error(accept_after(hello(tcp::kReverseMagic, kSecret, 2), false), ZCX_ERR_PROTOCOL,
               "socket count");
}

TEST_F(TcpReverseForged, HalfAHelloThenCloseIsAnError) {
  std::vector<uint8_t> h = hello(tcp::kReverseMagic, kSecret, 1);
  h.resize(50);
  expect_error(accept_after(h, true), ZCX_ERR_REMOTE, "closed");
}

}  // namespace
}  // namespace zcx::test
