// ZCX_STATS' counters and summary (collectives/core/comm_stats): operations by collective and
// algorithm, and per peer the traffic of host buffers and, on rows of their own, of device
// buffers, each named by the way it took.
#include "core/comm_stats.h"

#include "common/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

namespace zcx::coll {
namespace {

// "<peer> <link> <sent> <sends> <received> <receives>" as a row of the summary.
bool has_row(const std::string& report, int peer, const std::string& link, const char* counts) {
  const std::regex row(R"(\[zcx stats\] +)" + std::to_string(peer) + " +" + link + " +" + counts +
                       "\n");
  return std::regex_search(report, row);
}

std::string name_way(int peer, bool device) {
  if (peer == 2) return device ? "" : "tcp";  // never connected for device memory
  return device ? "cuda_ipc" : "shm";
}

TEST(CommStats, DeviceBuffersTrafficHasRowsOfItsOwn) {
  config::ScopedOverride on("ZCX_STATS", "1");
  CommStats stats(3);
  ASSERT_TRUE(stats.enabled());
  char buf[64] = {};
  Schedule host(ZCX_UINT8, ZCX_SUM), device(ZCX_UINT8, ZCX_SUM);
  host.send_checked(1, buf, 1000);
  host.recv_checked(2, buf, 500);
  device.set_device(0);
  device.send_checked(1, buf, 4000);
  device.send_checked(1, buf, 96);
  device.recv_checked(1, buf, 7);
  stats.count_op(CollKind::kSendRecv, Algo::kRing, 1500);
  stats.count_schedule(host);
  stats.count_schedule(device);
  const std::string r = stats.report("w", 0, name_way);
  EXPECT_TRUE(has_row(r, 1, "shm", "1000 +1 +0 +0")) << r;
  EXPECT_TRUE(has_row(r, 1, "cuda_ipc", "4096 +2 +7 +1")) << r;
  EXPECT_TRUE(has_row(r, 2, "tcp", "0 +0 +500 +1")) << r;
  EXPECT_EQ(r.find(" 2 -"), std::string::npos) << "a peer without device traffic has no row\n"
                                                << r;
  EXPECT_NE(r.find("sendrecv"), std::string::npos) << r;
}

// Time in flight, and the part of it the caller spent inside zcx (nested stretches once):
// 20 ms outside and 10 ms inside make a third of the flight not overlapped.
TEST(CommStats, OverlapIsTheFlightSpentOutsideZcx) {
  config::ScopedOverride on("ZCX_STATS", "1");
  CommStats stats(2);
  const CommStats::Posted posted = stats.posted();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    CommStats::Inside outer(stats);
    CommStats::Inside nested(stats);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stats.finished(CollKind::kAllgather, Algo::kRing, posted);
  {
    CommStats::Inside blocking(stats);
    const CommStats::Posted p = stats.posted();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stats.finished(CollKind::kAllreduce, Algo::kRing, p);
  }
  stats.finished(CollKind::kBroadcast, Algo::kRing, CommStats::Posted{});  // not timed
  const std::string r = stats.report("w", 0, name_way);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r, m, std::regex(R"(allgather +ring +0 calls +0 bytes +([0-9.]+) ms in flight +([0-9.]+)% overlapped)"))) << r;
  EXPECT_GE(std::stod(m[1]), 30.0);
  // 66.7% on an idle machine; counting the nested stretch twice would give 33%.
  EXPECT_GT(std::stod(m[2]), 50.0) << r;
  EXPECT_LT(std::stod(m[2]), 85.0) << r;
  EXPECT_TRUE(std::regex_search(r, std::regex(R"(allreduce +ring +0 calls +0 bytes +[0-9.]+ ms in flight +0\.0% overlapped)"))) << r;
  EXPECT_EQ(r.find("broadcast"), std::string::npos) << r;
}

TEST(CommStats, OffByDefaultCountsNothing) {
  config::ScopedOverride off("ZCX_STATS", "0");
  CommStats stats(2);
  EXPECT_FALSE(stats.enabled());
}

}  // namespace
}  // namespace zcx::coll
