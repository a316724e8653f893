// Departures: a page that says whether its rank left cleanly, read by a watcher that mapped
// it through /proc/<pid>/fd (here: this process's own, which takes the same path), and
// refused when it is not one (wrong token, wrong size, not there).
#include "base/departures.h"

#include "common/memfd.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <memory>

namespace zcx {
namespace {

TEST(Departures, LeftOnlyOnceMarkedAndStillReadAfterTheOwnerIsGone) {
  auto owner = std::make_unique<Departures>();
  owner->open_own();
  ASSERT_GE(owner->own_fd(), 0) << "no page could be made here";
  Departures watcher;
  watcher.watch(5, getpid(), owner->own_fd(), owner->own_token());
  EXPECT_FALSE(watcher.left(5));
  owner->mark_left();
  EXPECT_TRUE(watcher.left(5));
  owner.reset();  // its fd closed and its mapping gone: the watcher's mapping keeps the page
  EXPECT_TRUE(watcher.left(5));
  EXPECT_FALSE(watcher.left(4)) << "a rank that was never watched";
}

TEST(Departures, PagesThatAreNotTheRanksAreRefused) {
  Departures owner;
  owner.open_own();
  ASSERT_GE(owner.own_fd(), 0);
  owner.mark_left();
  Departures watcher;
  watcher.watch(1, getpid(), owner.own_fd(), owner.own_token() ^ 1);  // another token
  UniqueFd big;
  ASSERT_EQ(memfd_create_reserved(8192, "a test segment", kLogInit, &big), Status::kSuccess);
  watcher.watch(2, getpid(), big.get(), owner.own_token());  // not a page
  watcher.watch(3, getpid(), 1 << 20, owner.own_token());    // no such fd
  watcher.watch(4, -1, owner.own_fd(), owner.own_token());   // no pid
  for (int r = 1; r <= 4; ++r) EXPECT_FALSE(watcher.left(r)) << "rank " << r;
}

}  // namespace
}  // namespace zcx
