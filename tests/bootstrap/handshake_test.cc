// The root rejects bad connections with a logged reason and keeps serving the others.
#include "common/bootstrap/bootstrap.h"
#include "common/bootstrap/bootstrap_internal.h"
#include "common/bootstrap/bootstrap_wire.h"
#include "common/config_vars.h"
#include "bootstrap/test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>

namespace zcx {
namespace {

// Connects a raw socket to addr (blocking with a deadline).
UniqueFd raw_connect(const SockAddr& addr) {
  UniqueFd fd;
  Deadline dl = Deadline::after_ms(5000);
  for (;;) {
    if (ok(socket_connect_start(addr, &fd))) {
      Status s;
      while ((s = socket_connect_done(fd.get(), addr)) == Status::kInProgress && !dl.expired())
        usleep(1000);
      if (ok(s)) return fd;
    }
    if (dl.expired()) return UniqueFd();
    usleep(10000);
  }
}

bootwire::Hello good_hello(uint64_t secret, int rank, int nranks) {
  bootwire::Hello h;
  h.kind = bootwire::ConnKind::kRoot;
  h.lib_version = static_cast<uint32_t>(zcx_version());
  h.nranks = static_cast<uint32_t>(nranks);
  h.secret = secret;
  h.rank = static_cast<uint32_t>(rank);
  h.pid = static_cast<uint32_t>(getpid());
  EXPECT_EQ(sockaddr_parse("127.0.0.1:9", &h.listen), Status::kSuccess);
  h.host = "testhost";
  return h;
}

// Sends a hello and returns the root's verdict (kProtocol if the root just closed).
Status send_hello(const SockAddr& root, const bootwire::Hello& h, std::string* reason) {
  UniqueFd fd = raw_connect(root);
  if (!fd.valid()) return Status::kRemote;
  uint8_t buf[bootwire::kHelloBytes], reply[bootwire::kReplyBytes];
  bootwire::encode_hello(h, buf);
  Deadline dl = Deadline::after_ms(5000);
  if (failed(socket_send_all(fd.get(), buf, sizeof buf, dl, "root")) ||
      failed(socket_recv_all(fd.get(), reply, sizeof reply, dl, "root")))
    return Status::kProtocol;
  Status verdict;
  if (failed(bootwire::decode_reply(reply, &verdict, reason))) return Status::kProtocol;
  return verdict;
}

class Handshake : public ::testing::Test {
 protected:
  config::ScopedOverride timeout_{"ZCX_TIMEOUT", "10"};
};

TEST_F(Handshake, RootRejectsBadClientsAndKeepsServing) {
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  std::unique_ptr<Bootstrap> root;
  Status root_status = Status::kInternal;
  std::thread root_thread([&] { root_status = Bootstrap::init(id, 0, 2, &root); });

  {  // random bytes
    UniqueFd fd = raw_connect(id.root);
    ASSERT_TRUE(fd.valid());
    uint8_t junk[bootwire::kHelloBytes];
    std::mt19937 rng(7);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    ASSERT_EQ(socket_send_all(fd.get(), junk, sizeof junk, Deadline::after_ms(2000), "root"),
              Status::kSuccess);
    uint8_t reply[bootwire::kReplyBytes];
    Status s = socket_recv_all(fd.get(), reply, sizeof reply, Deadline::after_ms(5000), "root");
    (void)s;  // the root may answer or just close: either way it goes on serving
  }
  {  // a few bytes, then silence: must not block the root (its hello deadline handles it)
    UniqueFd slow = raw_connect(id.root);
    ASSERT_TRUE(slow.valid());
    ASSERT_EQ(::send(slow.get(), "ZCX", 3, MSG_NOSIGNAL), 3);
    std::string reason;
    bootwire::Hello h = good_hello(id.secret ^ 1, 1, 2);  // wrong secret, while slow is open
    EXPECT_EQ(send_hello(id.root, h, &reason), Status::kAuth);
    EXPECT_NE(reason.find("secret"), std::string::npos) << reason;
    EXPECT_EQ(reason.find(std::to_string(id.secret)), std::string::npos);
    h = good_hello(id.secret, 1, 2);
    h.wire_version = 99;
    EXPECT_EQ(send_hello(id.root, h, &reason), Status::kAuth);
    EXPECT_NE(reason.find("wire version"), std::string::npos) << reason;
    h = good_hello(id.secret, 1, 2);
    h.lib_version = 1;
    EXPECT_EQ(send_hello(id.root, h, &reason), Status::kAuth);
    h = good_hello(id.secret, 1, 3);
    EXPECT_EQ(send_hello(id.root, h, &reason), Status::kMismatch);  // nranks
    h = good_hello(id.secret, 5, 2);
    EXPECT_EQ(send_hello(id.root, h, &reason), Status::kMismatch);  // rank out of range
    h = good_hello(id.secret, 0, 2);
    EXPECT_EQ(send_hello(id.root, h, &reason), Status::kMismatch);  // duplicate of the root

    // A real rank with the wrong secret gets a clear error...
    UniqueId wrong = id;
    wrong.secret ^= 0x10;
    std::unique_ptr<Bootstrap> bad;
    EXPECT_EQ(Bootstrap::init(wrong, 1, 2, &bad), Status::kAuth);
    EXPECT_NE(std::string(last_error()).find("secret"), std::string::npos) << last_error();

    // ...and the right one still joins.
    std::unique_ptr<Bootstrap> client;
    ASSERT_EQ(Bootstrap::init(id, 1, 2, &client), Status::kSuccess) << last_error();
    root_thread.join();
    ASSERT_EQ(root_status, Status::kSuccess) << last_error();
    EXPECT_EQ(client->host(0), root->host(0));
    EXPECT_EQ(client->pid(0), getpid());
    int v[2] = {0, 11};
    int w[2] = {10, 0};
    std::thread t([&] { EXPECT_EQ(root->allgather(w, sizeof(int)), Status::kSuccess); });
    EXPECT_EQ(client->allgather(v, sizeof(int)), Status::kSuccess);
    t.join();
    EXPECT_EQ(v[0], 10);
    EXPECT_EQ(w[1], 11);
  }
}

TEST_F(Handshake, PeerListenerRejectsWrongSecret) {
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  std::unique_ptr<Bootstrap> bs[2];
  test::run_threads(2, [&](int r) { ASSERT_EQ(Bootstrap::init(id, r, 2, &bs[r]), Status::kSuccess); });
  // While rank 1 waits in recv, a stranger with the wrong secret and one sending junk
  // connect to its peer listener first; both are rejected and the real message arrives.
  const SockAddr listen1 = static_cast<SocketBootstrap&>(*bs[1]).peer_address(1);
  char msg[6] = "hello";
  std::thread others([&] {
    usleep(50000);
    bootwire::Hello h = good_hello(id.secret ^ 1, 0, 2);
    h.kind = bootwire::ConnKind::kPeer;
    std::string reason;
    EXPECT_EQ(send_hello(listen1, h, &reason), Status::kAuth);
    UniqueFd junk = raw_connect(listen1);
    uint8_t bytes[bootwire::kHelloBytes] = {1, 2, 3};
    EXPECT_EQ(socket_send_all(junk.get(), bytes, sizeof bytes, Deadline::after_ms(1000), "r1"),
              Status::kSuccess);
    EXPECT_EQ(bs[0]->send(1, 3, msg, sizeof msg), Status::kSuccess);
  });
  char got[6] = {};
  EXPECT_EQ(bs[1]->recv(0, 3, got, sizeof got), Status::kSuccess) << last_error();
  others.join();
  EXPECT_STREQ(got, "hello");
}

TEST(HandshakeWire, DecodeRejectsGarbage) {
  std::mt19937 rng(1);
  for (int i = 0; i < 1000; ++i) {
    uint8_t buf[bootwire::kHelloBytes];
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    bootwire::Hello h;
    std::string why;
    EXPECT_EQ(bootwire::decode_hello(buf, &h, &why), Status::kProtocol);
    bootwire::FrameHeader fh;
    if (ok(bootwire::decode_frame_header(buf, &fh))) {
      EXPECT_LE(fh.len, bootwire::kMaxFrameBytes);
    }
  }
  bootwire::Hello h = good_hello(5, 1, 2), back;
  uint8_t buf[bootwire::kHelloBytes];
  bootwire::encode_hello(h, buf);
  std::string why;
  ASSERT_EQ(bootwire::decode_hello(buf, &back, &why), Status::kSuccess) << why;
  EXPECT_EQ(bootwire::check_hello(back, bootwire::ConnKind::kRoot, 5, 2, &why), Status::kSuccess);
  EXPECT_EQ(back.host, "testhost");
  buf[60] = 0x01;  // a control character inside the host name
  EXPECT_EQ(bootwire::decode_hello(buf, &back, &why), Status::kProtocol);
}

}  // namespace
}  // namespace zcx
