#include "common/config.h"
#include "common/socket.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>

namespace zcx {
namespace {

TEST(Socket, ParsesIpv4Ipv6AndNames) {
  SockAddr a;
  ASSERT_EQ(sockaddr_parse("127.0.0.1:4242", &a), Status::kSuccess);
  EXPECT_EQ(a.port(), 4242);
  EXPECT_EQ(a.to_string(), "127.0.0.1:4242");
  ASSERT_EQ(sockaddr_parse("[::1]:7", &a), Status::kSuccess);
  EXPECT_EQ(a.to_string(), "[::1]:7");
  ASSERT_EQ(sockaddr_parse("localhost:80", &a), Status::kSuccess);
  EXPECT_EQ(a.port(), 80);
}

TEST(Socket, RejectsBadAddresses) {
  SockAddr a;
  EXPECT_NE(sockaddr_parse("", &a), Status::kSuccess);
  EXPECT_NE(sockaddr_parse("[::1", &a), Status::kSuccess);
  EXPECT_NE(sockaddr_parse("127.0.0.1:notaport", &a), Status::kSuccess);
  EXPECT_NE(sockaddr_parse(std::string(300, 'a'), &a), Status::kSuccess);
  EXPECT_NE(sockaddr_parse("127.0.0.1:1", nullptr), Status::kSuccess);
}

TEST(Socket, InterfaceSelectionHonoursIfname) {
  SockAddr a;
  std::string ifname;
  {
    config::ScopedOverride o("ZCX_SOCKET_IFNAME", "=lo");
    ASSERT_EQ(socket_local_address(&a, &ifname), Status::kSuccess);
    EXPECT_EQ(ifname, "lo");
  }
  {
    config::ScopedOverride o("ZCX_SOCKET_IFNAME", "nosuchif");
    EXPECT_EQ(socket_local_address(&a, &ifname), Status::kNoDevice);
  }
}

TEST(Socket, ListenConnectAcceptAndBoundedIo) {
  SockAddr lo, bound;
  ASSERT_EQ(sockaddr_parse("127.0.0.1:0", &lo), Status::kSuccess);
  UniqueFd lfd, cfd, afd;
  ASSERT_EQ(socket_listen(lo, 16, &lfd, &bound), Status::kSuccess);
  EXPECT_NE(bound.port(), 0);
  ASSERT_EQ(socket_connect_start(bound, &cfd), Status::kSuccess);
  Deadline dl = Deadline::after_ms(2000);
  Status s;
  while ((s = socket_accept(lfd.get(), &afd, nullptr)) == Status::kInProgress && !dl.expired()) {
  }
  ASSERT_EQ(s, Status::kSuccess);
  while ((s = socket_connect_done(cfd.get(), bound)) == Status::kInProgress && !dl.expired()) {
  }
  ASSERT_EQ(s, Status::kSuccess);
  const char msg[] = "hello";
  char got[sizeof msg] = {};
  ASSERT_EQ(socket_send_all(cfd.get(), msg, sizeof msg, dl, "peer"), Status::kSuccess);
  ASSERT_EQ(socket_recv_all(afd.get(), got, sizeof got, dl, "peer"), Status::kSuccess);
  EXPECT_STREQ(got, msg);
  // Nothing more arrives: the bounded receive times out instead of hanging.
  int64_t t0 = now_ms();
  EXPECT_EQ(socket_recv_all(afd.get(), got, 1, Deadline::after_ms(100), "rank 1 (h)"),
            Status::kTimeout);
  EXPECT_LT(now_ms() - t0, 1000);
  EXPECT_NE(std::string(last_error()).find("rank 1 (h)"), std::string::npos);
  cfd.reset();  // peer closes: the receive reports it
  EXPECT_EQ(socket_recv_all(afd.get(), got, 1, dl, "rank 1"), Status::kRemote);
}

// A launcher's root port is free and below the ephemeral range, where no connect() or
// listener on port 0 can take it before rank 0 binds it.
TEST(Socket, PickedRootPortIsFreeAndOutsideTheEphemeralRange) {
  int low = 32768, high = 60999;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    ASSERT_EQ(fscanf(f, "%d %d", &low, &high), 2);
    fclose(f);
  }
  for (int i = 0; i < 20; ++i) {
    int port = 0;
    ASSERT_EQ(socket_pick_loopback_port(&port), Status::kSuccess);
    EXPECT_GE(port, 1024);
    EXPECT_LT(port, low);
    SockAddr addr, bound;
    UniqueFd fd;
    ASSERT_EQ(sockaddr_parse("127.0.0.1:" + std::to_string(port), &addr), Status::kSuccess);
    EXPECT_EQ(socket_listen(addr, 1, &fd, &bound), Status::kSuccess) << port;
  }
}

TEST(Socket, ConnectRefusedIsReported) {
  SockAddr lo, bound;
  ASSERT_EQ(sockaddr_parse("127.0.0.1:0", &lo), Status::kSuccess);
  UniqueFd lfd, cfd;
  ASSERT_EQ(socket_listen(lo, 1, &lfd, &bound), Status::kSuccess);
  lfd.reset();  // nobody listens there now
  Status s = socket_connect_start(bound, &cfd);
  if (s == Status::kSuccess) {
    Deadline dl = Deadline::after_ms(2000);
    while ((s = socket_connect_done(cfd.get(), bound)) == Status::kInProgress && !dl.expired()) {
    }
  }
  EXPECT_EQ(s, Status::kRemote);
}

// The tcp provider opens one socket per connection to a peer on this host, more to others.
TEST(Socket, ThisHostIsLoopbackOrAnOwnAddress) {
  SockAddr a;
  ASSERT_EQ(sockaddr_parse("127.0.0.1:9", &a), Status::kSuccess);
  EXPECT_TRUE(sockaddr_is_this_host(a));
  ASSERT_EQ(sockaddr_parse("127.5.6.7", &a), Status::kSuccess);
  EXPECT_TRUE(sockaddr_is_this_host(a));
  ASSERT_EQ(sockaddr_parse("[::1]:9", &a), Status::kSuccess);
  EXPECT_TRUE(sockaddr_is_this_host(a));
  std::string ifname;
  ASSERT_EQ(socket_local_address(&a, &ifname), Status::kSuccess);
  EXPECT_TRUE(sockaddr_is_this_host(a)) << a.to_string() << " on " << ifname;
  ASSERT_EQ(sockaddr_parse("192.0.2.1:9", &a), Status::kSuccess);  // TEST-NET-1 (RFC 5737)
  EXPECT_FALSE(sockaddr_is_this_host(a));
}

}  // namespace
}  // namespace zcx
