#include "common/status.h"

#include "common/fd.h"
#include "common/memfd.h"
#include "common/no_free_fds.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace zcx {
namespace {

TEST(Status, NamesEveryCode) {
  for (int c = 0; c < ZCX_STATUS_COUNT; ++c)
    EXPECT_STRNE(zcx_status_string(static_cast<zcx_status_t>(c)), "unknown status") << c;
  EXPECT_STREQ(zcx_status_string(static_cast<zcx_status_t>(-1)), "unknown status");
  EXPECT_STREQ(zcx_status_string(ZCX_STATUS_COUNT), "unknown status");
}

TEST(Status, SetErrorRecordsLastErrorAndReturnsStatus) {
  clear_last_error();
  Status s = set_error_quiet(Status::kRemote, "peer rank %d (%s) died", 3, "hostA");
  EXPECT_EQ(s, Status::kRemote);
  EXPECT_STREQ(last_error(), "peer rank 3 (hostA) died");
  EXPECT_STREQ(zcx_get_last_error(), "peer rank 3 (hostA) died");
}

// Out of descriptors (many communicators, a low ulimit -n): the error says which limit.
TEST(Status, OutOfDescriptorsNamesTheLimit) {
  test::NoFreeFds no_fds;
  ASSERT_TRUE(no_fds.active());
  UniqueFd fd;
  const Status st = memfd_create_reserved(4096, "a test segment", kLogShm, &fd);
  const std::string msg = last_error();
  ASSERT_TRUE(no_fds.restore());
  EXPECT_EQ(st, Status::kSystem) << msg;
  EXPECT_NE(msg.find("open-file limit (RLIMIT_NOFILE; raise it with ulimit -n)"), std::string::npos)
      << msg;
  EXPECT_STREQ(errno_text(ENOENT), strerror(ENOENT));
}

TEST(Status, LastErrorIsPerThread) {
  (void)set_error_quiet(Status::kInternal, "main thread");
  std::string other;
  std::thread t([&] { other = last_error(); });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_STREQ(last_error(), "main thread");
}

TEST(Status, StickyErrorKeepsTheFirstFailure) {
  StickyError e;
  EXPECT_FALSE(e.has());
  e.record(Status::kInProgress, "not an error");
  EXPECT_FALSE(e.has());
  e.record(Status::kRemote, "first");
  e.record(Status::kTimeout, "second");
  EXPECT_EQ(e.status(), Status::kRemote);
  EXPECT_EQ(e.raise(), Status::kRemote);
  EXPECT_STREQ(last_error(), "first");
}

}  // namespace
}  // namespace zcx
