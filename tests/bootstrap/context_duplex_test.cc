// Duplex connections in the context, over the real tcp provider with ranks as threads: a
// pair of ranks shares one TCP connection (the lower rank connects, the higher one sends
// back over it), counted by the sockets' own state against ZCX_DUPLEX_WAIT=0; the higher
// rank's sends wait for the lower rank's connection; a lower rank that connects too late
// gets one-way connections; a peer gone before it sent back fails only the receives from it.
#include "base/context.h"
#include "base/registry.h"
#include "bootstrap/test_util.h"
#include "common/clock.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

namespace zcx {
namespace {

// ESTABLISHED TCP sockets this process holds, each once however many fds name it. Each
// socket is asked for its state (TCP_INFO): a reader of /proc/net/tcp can skip or repeat
// entries while other processes open and close sockets, and a parallel ctest beside the
// listener flood test once made a pair's count -1 that way.
int established_tcp_sockets() {
  std::set<ino_t> seen;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(e.path().filename().c_str());
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || !seen.insert(st.st_ino).second) continue;
    int protocol = 0;
    socklen_t len = sizeof protocol;
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) != 0 || protocol != IPPROTO_TCP)
      continue;
    tcp_info info{};
    len = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
        info.tcpi_state == TCP_ESTABLISHED)
      ++n;
  }
  return n;
}

using Contexts = std::vector<std::unique_ptr<Context>>;
using BodyFn = std::function<void(Contexts&, int rank)>;

class ContextDuplex : public ::testing::Test {
 protected:
  config::ScopedOverride timeout_{"ZCX_TIMEOUT", "20"};
  config::ScopedOverride nsocks_{"ZCX_TCP_NSOCKS", "1"};  // the counts assume one socket each

  // n thread ranks with contexts over tcp only, under ZCX_DUPLEX_WAIT=wait; runs body on
  // each and returns how many more ESTABLISHED sockets the process holds after the bodies
  // than before them (contexts up, the bootstrap's own links made by two barriers): the
  // providers' connections, two socket ends each.
  int run(int n, const char* wait, const BodyFn& body) {
    config::ScopedOverride duplex("ZCX_DUPLEX_WAIT", wait);
    UniqueId id;
    EXPECT_EQ(test::loopback_id(&id), Status::kSuccess);
    Contexts ctx(static_cast<size_t>(n));
    std::atomic<int> failures{0};
    test::run_threads(n, [&](int r) {
      std::unique_ptr<Bootstrap> bs;
      Status s = Bootstrap::init(id, r, n, &bs);
      ContextOptions options{{provider_find("tcp")}, "same-host"};
      if (ok(s)) s = Context::create(std::move(bs), options, &ctx[static_cast<size_t>(r)]);
      if (failed(s)) {
        ADD_FAILURE() << "rank " << r << ": " << last_error();
        ++failures;
      }
    });
    if (failures.load() != 0) return -1;
    int before = 0;
    test::run_threads(n, [&](int r) {
      Bootstrap& bs = ctx[static_cast<size_t>(r)]->bootstrap();
      ASSERT_EQ(bs.barrier(), Status::kSuccess);
      ASSERT_EQ(bs.barrier(), Status::kSuccess);
      if (r == 0) before = established_tcp_sockets();
      ASSERT_EQ(bs.barrier(), Status::kSuccess);
      body(ctx, r);
    });
    int added = established_tcp_sockets() - before;
    ctx.clear();
    return added;
  }
};

// Sends `bytes` pattern bytes to `to` and receives as many from `from`, verified; returns
// "" or what went wrong (usable in forked children, where gtest assertions do not reach).
std::string exchange_error(Context& c, int r, int to, int from, size_t bytes) {
  Endpoint *out = nullptr, *in = nullptr;
  if (failed(c.endpoint(to, &out)) || failed(c.endpoint(from, &in)))
    return std::string("endpoint: ") + last_error();
  std::vector<uint8_t> src(bytes), dst(bytes + 1, 0xee);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(r * 31 + to + i * 7);
  Request *sreq = nullptr, *rreq = nullptr;
  size_t got = 0;
  if (failed(in->irecv(dst.data(), dst.size(), 0, &rreq)) ||
      failed(out->isend(src.data(), bytes, 0, &sreq)) || failed(c.wait(sreq, nullptr)) ||
      failed(c.wait(rreq, &got)))
    return std::string("transfer: ") + last_error();
  if (got != bytes) return "received " + std::to_string(got) + " bytes";
  for (size_t i = 0; i < bytes; ++i)
    if (dst[i] != static_cast<uint8_t>(from * 31 + r + i * 7))
      return "bad byte " + std::to_string(i);
  return "";
}

void exchange(Context& c, int r, int to, int from, size_t bytes) {
  ASSERT_EQ(exchange_error(c, r, to, from, bytes), "") << "rank " << r;
}

// Every rank with every other, both ways, two sizes; then a barrier so that nobody
// tears down under a peer.
void all_pairs(Contexts& ctx, int r) {
  Context& c = *ctx[static_cast<size_t>(r)];
  int n = c.nranks();
  for (int k = 1; k < n; ++k)
    for (size_t bytes : {size_t{8}, (size_t{1} << 20) + 3})
      exchange(c, r, (r + k) % n, (r + n - k) % n, bytes);
  ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);
}

TEST_F(ContextDuplex, EachPairOfRanksSharesOneConnection) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(n);
    const int pairs = n * (n - 1) / 2;
    EXPECT_EQ(run(n, "0", all_pairs), 4 * pairs);  // two connections per pair, two ends each
    EXPECT_EQ(run(n, "5", all_pairs), 2 * pairs);  // one
  }
}

// Rank 1 sends at once; rank 0 makes its endpoint (its connection) only after `delay_ms`.
void late_lower_rank(Contexts& ctx, int r, int delay_ms) {
  Context& c = *ctx[static_cast<size_t>(r)];
  if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  exchange(c, r, 1 - r, 1 - r, 4096);
  ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);
}

TEST_F(ContextDuplex, HigherRanksSendsWaitForTheLowerRanksConnection) {
  int64_t t0 = now_ms();
  EXPECT_EQ(run(2, "5", [](Contexts& ctx, int r) { late_lower_rank(ctx, r, 300); }), 2);
  EXPECT_GE(now_ms() - t0, 300);
}

TEST_F(ContextDuplex, TooLateALowerRankGetsOneWayConnections) {
  EXPECT_EQ(run(2, "0.1", [](Contexts& ctx, int r) { late_lower_rank(ctx, r, 600); }), 4);
}

// Rank 1 makes its endpoint to rank 0 (so it would send back over rank 0's connection) and
// leaves before sending anything; rank 0's receive from it fails naming it, while rank 0
// and rank 2 go on.
TEST_F(ContextDuplex, PeerGoneBeforeSendingBackFailsOnlyItsReceives) {
  std::atomic<int> stage{0};
  run(3, "5", [&](Contexts& ctx, int r) {
    Context& c = *ctx[static_cast<size_t>(r)];
    Endpoint* ep = nullptr;
    if (r == 1) {
      ASSERT_EQ(c.endpoint(0, &ep), Status::kSuccess) << last_error();
      while (stage.load() < 1) std::this_thread::yield();  // rank 0 has connected to us
      ctx[1].reset();
      stage = 2;
      return;
    }
    if (r == 0) {
      ASSERT_EQ(c.endpoint(1, &ep), Status::kSuccess) << last_error();
      stage = 1;
      while (stage.load() < 2) std::this_thread::yield();
      uint8_t buf[8];
      Request* req = nullptr;
      ASSERT_EQ(ep->irecv(buf, sizeof buf, 0, &req), Status::kSuccess) << last_error();
      int64_t t0 = now_ms();
      EXPECT_EQ(c.wait(req, nullptr), Status::kRemote);
      EXPECT_LT(now_ms() - t0, 3000);
      EXPECT_NE(std::string(last_error()).find("rank 1"), std::string::npos) << last_error();
    }
    exchange(c, r, 2 - r, 2 - r, 100000);  // ranks 0 and 2
  });
}

// Ranks whose ZCX_DUPLEX_WAIT differ (forked, each with its own environment): the lower
// rank takes a reverse whatever its own setting, so both ways still deliver.
TEST_F(ContextDuplex, RanksWithDifferentSettingsStillExchange) {
  for (const auto& waits : {std::pair{"0", "5"}, std::pair{"5", "0"}}) {
    SCOPED_TRACE(std::string(waits.first) + " / " + waits.second);
    UniqueId id;
    ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
    std::vector<pid_t> kids;
    for (int r = 0; r < 2; ++r)
      kids.push_back(test::fork_child([&, r] {
        setenv("ZCX_DUPLEX_WAIT", r == 0 ? waits.first : waits.second, 1);
        std::unique_ptr<Bootstrap> bs;
        std::unique_ptr<Context> c;
        ContextOptions options{{provider_find("tcp")}, "same-host"};
        if (failed(Bootstrap::init(id, r, 2, &bs)) ||
            failed(Context::create(std::move(bs), options, &c)))
          return 2;
        for (size_t bytes : {size_t{8}, (size_t{1} << 20) + 3}) {
          std::string error = exchange_error(*c, r, 1 - r, 1 - r, bytes);
          if (!error.empty()) {
            fprintf(stderr, "rank %d: %s\n", r, error.c_str());
            return 1;
          }
        }
        return failed(c->bootstrap().barrier()) ? 3 : 0;
      }));
    for (pid_t kid : kids) EXPECT_EQ(test::wait_child(kid, 15000), 0);
  }
}

}  // namespace
}  // namespace zcx
