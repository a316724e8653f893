// gpu_hold: device-wide work runs at once while no stream hold is live, waits in the queue
// while one is, and runs from run_deferred once none is.
#include "common/gpu_hold.h"

#include <gtest/gtest.h>

#include <thread>

namespace zcx {
namespace {

TEST(GpuHold, WorkRunsAtOnceWithoutAHold) {
  ASSERT_FALSE(gpu_hold::live());
  int ran = 0;
  gpu_hold::run_or_defer([&] { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(gpu_hold::deferred(), 0u);
}

TEST(GpuHold, WorkWaitsUntilEveryHoldEnded) {
  int ran = 0;
  gpu_hold::begin();
  gpu_hold::begin();  // two communicators' calls in flight
  gpu_hold::run_or_defer([&] { ++ran; });
  gpu_hold::run_or_defer([&] { ++ran; });
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(gpu_hold::deferred(), 2u);
  gpu_hold::run_deferred();  // still live: nothing runs
  EXPECT_EQ(ran, 0);
  gpu_hold::end();
  gpu_hold::run_deferred();
  EXPECT_EQ(ran, 0);
  gpu_hold::end();
  EXPECT_FALSE(gpu_hold::live());
  gpu_hold::run_deferred();
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(gpu_hold::deferred(), 0u);
}

// For a caller that cannot go on without the queued work (cuda_ipc's reused range).
TEST(GpuHold, RunDeferredNowIgnoresTheHolds) {
  int ran = 0;
  gpu_hold::begin();
  gpu_hold::run_or_defer([&] { ++ran; });
  gpu_hold::run_deferred_now();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(gpu_hold::deferred(), 0u);
  gpu_hold::end();
}

// Work queued on one thread (a progress thread, mid-call) runs on another (the next caller).
TEST(GpuHold, WorkQueuedOnOneThreadRunsOnAnother) {
  std::thread::id ran_on;
  gpu_hold::begin();
  std::thread progress(
      [&] { gpu_hold::run_or_defer([&] { ran_on = std::this_thread::get_id(); }); });
  progress.join();
  gpu_hold::end();
  gpu_hold::run_deferred();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace zcx
