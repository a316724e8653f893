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

// The listener's address, read back from its handle (layout in docs/WIRE.md).
SockAddr handle_address(const char* handle) {
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

}  // namespace
}  // namespace zcx::test
