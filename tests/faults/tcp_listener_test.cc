// A tcp listener facing strangers: a connector with the wrong job secret, random bytes, an
// HTTP scraper and a client that connects and says nothing. Each is rejected with a WARN
// naming its address, none blocks accept, and a legitimate connection still works.
#include "base/handle.h"
#include "base/registry.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/socket.h"
#include "common/wire.h"
#include "transport/provider_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace zcx::test {
namespace {

std::mutex g_log_mu;
std::vector<std::string> g_warnings;

void capture(LogLevel level, uint32_t, const char*, int, const char* message) {
  if (level != LogLevel::kWarn) return;
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_warnings.push_back(message);
}

bool warned_about(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  for (const std::string& w : g_warnings)
    if (w.find(what) != std::string::npos && w.find("rejected") != std::string::npos)
      return true;
  return false;
}

// The listener's address (and nonce), read back from its handle (layout in docs/WIRE.md).
SockAddr handle_address(const char* handle, uint64_t* nonce = nullptr) {
  uint8_t payload[kHandlePayloadMax];
  size_t len = 0;
  SockAddr a;
  if (handle_decode(handle, ZCX_PROVIDER_ID_TCP, payload, sizeof payload, &len) != Status::kSuccess)
    return a;
  wire::Reader r(payload, len);
  uint8_t family = r.u8();
  uint8_t addr[16];
  r.bytes(addr, sizeof addr);
  int port = r.u16();
  if (nonce) *nonce = r.u64();
  char text[INET6_ADDRSTRLEN] = "";
  inet_ntop(family == 4 ? AF_INET : AF_INET6, addr, text, sizeof text);
  std::string s = family == 4 ? std::string(text) : "[" + std::string(text) + "]";
  (void)sockaddr_parse(s + ":" + std::to_string(port), &a);
  return a;
}

// A raw client: connects and sends `bytes` (possibly none), keeping the socket open.
UniqueFd raw_client(const SockAddr& addr, const std::string& bytes) {
  UniqueFd fd;
  if (socket_connect_start(addr, &fd) != Status::kSuccess) return fd;
  Deadline dl = Deadline::after_ms(5000);
  while (socket_connect_done(fd.get(), addr) == Status::kInProgress && !dl.expired()) {
  }
  if (!bytes.empty())
    (void)socket_send_all(fd.get(), bytes.data(), bytes.size(), dl, "listener");
  return fd;
}

class TcpListener : public ::testing::Test {
 protected:
  void SetUp() override {
    ops_ = provider_find("tcp");
    ASSERT_NE(ops_, nullptr);
    log_set_sink(capture);
    ASSERT_EQ(server_.init(ops_, 0, 2, 0x1111), ZCX_SUCCESS);
    ASSERT_EQ(client_.init(ops_, 1, 2, 0x1111), ZCX_SUCCESS);
    ASSERT_EQ(intruder_.init(ops_, 5, 6, 0x2222), ZCX_SUCCESS);  // another job's secret
    ASSERT_EQ(ops_->listen(server_.ctx, 0, handle_, &listen_), ZCX_SUCCESS);
  }
  void TearDown() override {
    if (listen_) (void)ops_->close_listen(listen_);
    log_set_sink(nullptr);
  }
  // Polls accept for `ms`; returns the first comm that appears (nullptr if none).
  void* accept_for(int ms) {
    void* recv = nullptr;
    Deadline dl = Deadline::after_ms(ms);
    while (recv == nullptr && !dl.expired())
      EXPECT_EQ(ops_->accept(listen_, &recv), ZCX_SUCCESS) << zcx_get_last_error();
    return recv;
  }
  // A legitimate connection, driven together with accept; checks one message end to end.
  void legit_connection_works() {
    void *send = nullptr, *recv = nullptr;
    Deadline dl = Deadline::after_ms(10000);
    while ((send == nullptr || recv == nullptr) && !dl.expired()) {
      if (send == nullptr) {
        ASSERT_EQ(ops_->connect(client_.ctx, 0, handle_, &send), ZCX_SUCCESS);
      }
      if (recv == nullptr) {
        ASSERT_EQ(ops_->accept(listen_, &recv), ZCX_SUCCESS);
      }
    }
    ASSERT_NE(send, nullptr);
    ASSERT_NE(recv, nullptr) << "a legitimate connector was not accepted";
    std::vector<uint8_t> src(100000), dst(100000);
    fill_pattern(src.data(), src.size(), 1);
    void* buf = dst.data();
    size_t cap = dst.size();
    int tag = 0;
    void *s, *r;
    ASSERT_EQ(post_recv(ops_, recv, 1, &buf, &cap, &tag, nullptr, &r), ZCX_SUCCESS);
    ASSERT_EQ(post_send(ops_, send, src.data(), src.size(), 0, nullptr, &s), ZCX_SUCCESS);
    std::vector<void*> reqs{s, r};
    ASSERT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
    EXPECT_EQ(check_pattern(dst.data(), dst.size(), 1), "");
    (void)ops_->close_send(send);
    (void)ops_->close_recv(recv);
  }

  const zcx_provider_ops_t* ops_ = nullptr;
  ProviderCtx server_, client_, intruder_;
  char handle_[ZCX_HANDLE_BYTES] = {};
  void* listen_ = nullptr;
};

TEST_F(TcpListener, WrongSecretIsRejectedAndLogged) {
  void* send = nullptr;
  Deadline dl = Deadline::after_ms(5000);
  while (send == nullptr && !dl.expired())  // connect completes: it does not wait for accept
    ASSERT_EQ(ops_->connect(intruder_.ctx, 0, handle_, &send), ZCX_SUCCESS);
  EXPECT_EQ(accept_for(300), nullptr) << "a connector with the wrong secret was accepted";
  EXPECT_TRUE(warned_about("wrong job secret"));
  EXPECT_TRUE(warned_about("127.0.0.1") || warned_about("from "));
  if (send) (void)ops_->close_send(send);
  legit_connection_works();
}

TEST_F(TcpListener, GarbageAndSilentClientsDoNotBlockAccept) {
  SockAddr addr = handle_address(handle_);
  ASSERT_NE(addr.port(), 0);
  UniqueFd silent = raw_client(addr, "");  // says nothing, stays connected
  std::string noise(4096, '\0');
  std::mt19937 rng(1);
  for (char& c : noise) c = static_cast<char>(rng());
  UniqueFd random = raw_client(addr, noise);
  UniqueFd http = raw_client(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(accept_for(300), nullptr);
  EXPECT_TRUE(warned_about("wrong magic") || warned_about("short hello"));
  legit_connection_works();  // while the silent client still holds its socket
}

TEST_F(TcpListener, ClientThatHangsUpMidHelloIsDropped) {
  SockAddr addr = handle_address(handle_);
  { UniqueFd half = raw_client(addr, std::string(40, 'Z')); }  // closed after 40 bytes
  EXPECT_EQ(accept_for(200), nullptr);
  legit_connection_works();
}

// A forged but well-authenticated connector (one socket) that then sends hostile framing.
class TcpWire : public TcpListener {
 protected:
  // Connects, presents a valid hello, and returns the accepted recv comm.
  void forge(UniqueFd* fd, void** recv) {
    uint64_t nonce = 0;
    SockAddr addr = handle_address(handle_, &nonce);
    uint8_t hello[128] = {};
    wire::Writer w(hello, sizeof hello);
    w.u32(0x5443585a);
    w.u16(1);
    w.u8(1);   // nsocks
    w.u8(0);   // index
    w.u64(0x1111);  // the job secret
    w.u64(nonce);
    w.u64(0xfeedface);
    w.u32(9);  // rank
    w.u32(4242);
    w.u64(65536);
    w.u64(524288);
    w.bytes("forger", 7);
    *fd = raw_client(addr, std::string(reinterpret_cast<char*>(hello), sizeof hello));
    *recv = accept_for(3000);
    ASSERT_NE(*recv, nullptr) << "a valid forged hello was not accepted";
  }
  static std::string header(uint32_t magic, uint32_t seq, uint64_t size, int32_t tag) {
    uint8_t h[24] = {};
    wire::Writer w(h, sizeof h);
    w.u32(magic);
    w.u32(seq);
    w.u64(size);
    w.u32(static_cast<uint32_t>(tag));
    w.u32(0);
    return std::string(reinterpret_cast<char*>(h), sizeof h);
  }
  // Posts a 100-byte receive, feeds `bytes`, and returns how the receive ends.
  zcx_status_t receive_after(const std::string& bytes, bool close_after, int nrecv = 1) {
    UniqueFd fd;
    void* recv = nullptr;
    forge(&fd, &recv);
    if (recv == nullptr) return ZCX_ERR_INTERNAL;
    std::vector<std::vector<char>> bufs(nrecv, std::vector<char>(100));
    std::vector<void*> reqs;
    for (int i = 0; i < nrecv; ++i) {
      void* b = bufs[i].data();
      size_t cap = 100;
      int tag = 0;
      void* r;
      EXPECT_EQ(post_recv(ops_, recv, 1, &b, &cap, &tag, nullptr, &r), ZCX_SUCCESS);
      reqs.push_back(r);
    }
    (void)socket_send_all(fd.get(), bytes.data(), bytes.size(), Deadline::after_ms(2000), "x");
    if (close_after) fd.reset();
    zcx_status_t st = wait_requests(ops_, reqs, nullptr, 3000);
    last_ = zcx_get_last_error();
    (void)ops_->close_recv(recv);
    return st;
  }
  std::string last_;
};

constexpr uint32_t kMsg = 0x4d43585a;

TEST_F(TcpWire, ValidFramingIsReceived) {
  EXPECT_EQ(receive_after(header(kMsg, 0, 10, 0) + std::string(10, 'a'), false), ZCX_SUCCESS);
}

TEST_F(TcpWire, SizeBeyondTheBufferIsTruncationNamingThePeer) {
  EXPECT_EQ(receive_after(header(kMsg, 0, 1000, 0) + std::string(1000, 'a'), false),
            ZCX_ERR_INVALID_USAGE);
  EXPECT_NE(last_.find("truncated"), std::string::npos) << last_;
  EXPECT_NE(last_.find("rank 9"), std::string::npos) << last_;
  EXPECT_NE(last_.find("forger"), std::string::npos) << last_;
}

TEST_F(TcpWire, HugeSizeIsAProtocolError) {
  EXPECT_EQ(receive_after(header(kMsg, 0, UINT64_MAX, 0), false), ZCX_ERR_PROTOCOL);
  EXPECT_EQ(receive_after(header(kMsg, 0, uint64_t{1} << 63, 0), false), ZCX_ERR_PROTOCOL);
}

TEST_F(TcpWire, OutOfOrderSequenceIsAProtocolError) {
  EXPECT_EQ(receive_after(header(kMsg, 5, 10, 0) + std::string(10, 'a'), false),
            ZCX_ERR_PROTOCOL);
  std::string twice = header(kMsg, 0, 1, 0) + "a" + header(kMsg, 0, 1, 0) + "b";
  EXPECT_EQ(receive_after(twice, false, 2), ZCX_ERR_PROTOCOL);
}

TEST_F(TcpWire, WrongMagicIsAProtocolError) {
  EXPECT_EQ(receive_after(header(0x12345678, 0, 10, 0), false), ZCX_ERR_PROTOCOL);
}

TEST_F(TcpWire, ShortPayloadThenCloseIsRemote) {
  EXPECT_EQ(receive_after(header(kMsg, 0, 50, 0) + std::string(20, 'a'), true), ZCX_ERR_REMOTE);
  EXPECT_EQ(receive_after(header(kMsg, 0, 50, 0).substr(0, 10), true), ZCX_ERR_REMOTE);
}

TEST_F(TcpWire, RandomStreamsNeverCrash) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    std::string noise = header(kMsg, 0, rng() % 200, 0);
    noise.resize(24 + rng() % 400);
    for (size_t i = 24; i < noise.size(); ++i) noise[i] = static_cast<char>(rng());
    if (trial % 2) noise[static_cast<size_t>(rng() % 24)] = static_cast<char>(rng());
    zcx_status_t st = receive_after(noise, true, 3);
    EXPECT_NE(st, ZCX_SUCCESS);  // 3 receives can never all be satisfied by one message
  }
}

}  // namespace
}  // namespace zcx::test
