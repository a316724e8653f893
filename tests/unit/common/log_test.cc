#include "common/config.h"
#include "common/log.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace zcx {
namespace {

TEST(Log, LevelAndSubsystemMask) {
  config::ScopedOverride level("ZCX_DEBUG", "INFO");
  config::ScopedOverride subsys("ZCX_DEBUG_SUBSYS", "NET,SHM");
  log_reload();
  EXPECT_TRUE(log_enabled(LogLevel::kInfo, kLogNet));
  EXPECT_TRUE(log_enabled(LogLevel::kWarn, kLogShm));
  EXPECT_FALSE(log_enabled(LogLevel::kInfo, kLogIb));
  EXPECT_FALSE(log_enabled(LogLevel::kTrace, kLogNet));
}

// "info" is INFO (users write NCCL_DEBUG=info too); an unknown level is WARN, said on stderr.
TEST(Log, LevelInAnyCaseAndUnknownLevelIsWarn) {
  {
    config::ScopedOverride level("ZCX_DEBUG", "info");
    log_reload();
    EXPECT_TRUE(log_enabled(LogLevel::kInfo, kLogNet));
  }
  config::ScopedOverride level("ZCX_DEBUG", "loud");
  testing::internal::CaptureStderr();
  log_reload();
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(log_enabled(LogLevel::kWarn, kLogNet));
  EXPECT_FALSE(log_enabled(LogLevel::kInfo, kLogNet));
  EXPECT_NE(said.find("ZCX_DEBUG='loud'"), std::string::npos) << said;
}

TEST(Log, UnknownSubsystemIsSaid) {
  config::ScopedOverride subsys("ZCX_DEBUG_SUBSYS", "NET,SMH");
  testing::internal::CaptureStderr();
  log_reload();
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("no subsystem 'SMH'"), std::string::npos) << said;
  EXPECT_TRUE(log_enabled(LogLevel::kWarn, kLogNet));
  EXPECT_FALSE(log_enabled(LogLevel::kWarn, kLogShm));
}

TEST(Log, ExcludeMask) {
  config::ScopedOverride level("ZCX_DEBUG", "TRACE");
  config::ScopedOverride subsys("ZCX_DEBUG_SUBSYS", "^SHM");
  log_reload();
  EXPECT_TRUE(log_enabled(LogLevel::kTrace, kLogNet));
  EXPECT_FALSE(log_enabled(LogLevel::kWarn, kLogShm));
}

TEST(Log, FileNameExpandsHostPidRank) {
  char dir[] = "/tmp/zcx-log-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string pattern = std::string(dir) + "/log.%h.%p.%r";
  config::ScopedOverride level("ZCX_DEBUG", "INFO");
  config::ScopedOverride file("ZCX_DEBUG_FILE", pattern);
  config::ScopedOverride subsys("ZCX_DEBUG_SUBSYS", "ALL");
  log_set_rank(5);
  log_reload();
  ZCX_INFO(kLogInit, "hello %d", 42);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  std::string path = std::string(dir) + "/log." + host + "." + std::to_string(getpid()) + ".5";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("hello 42"), std::string::npos);
  EXPECT_NE(ss.str().find("INFO INIT"), std::string::npos);
  log_set_rank(-1);
  config::clear_override("ZCX_DEBUG_FILE");
  log_reload();
  unlink(path.c_str());
  rmdir(dir);
}

// Before the bootstrap sets the rank, %r is the launcher's (ZCX_RANK here), not "x".
TEST(Log, FileNameRankFromTheLauncherBeforeTheBootstrap) {
  char dir[] = "/tmp/zcx-log-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  config::ScopedOverride level("ZCX_DEBUG", "INFO");
  config::ScopedOverride file("ZCX_DEBUG_FILE", std::string(dir) + "/log.%r");
  config::ScopedOverride rank("ZCX_RANK", "3");
  log_set_rank(-1);
  log_reload();
  ZCX_INFO(kLogInit, "early");
  const std::string path = std::string(dir) + "/log.3";
  EXPECT_TRUE(std::ifstream(path).good()) << path;
  config::clear_override("ZCX_DEBUG_FILE");
  log_reload();
  unlink(path.c_str());
  rmdir(dir);
}

TEST(Log, SinkReceivesMessages) {
  static std::string got;
  config::ScopedOverride level("ZCX_DEBUG", "WARN");
  log_reload();
  log_set_sink([](LogLevel, uint32_t, const char*, int, const char* msg) { got = msg; });
  ZCX_WARN(kLogNet, "through the sink %s", "ok");
  log_set_sink(nullptr);
  EXPECT_EQ(got, "through the sink ok");
}

TEST(Log, SubsystemNames) {
  EXPECT_EQ(log_subsys_from_name("tuning"), kLogTuning);
  EXPECT_STREQ(log_subsys_name(kLogBootstrap), "BOOTSTRAP");
  EXPECT_EQ(log_subsys_from_name("nope"), 0u);
}

}  // namespace
}  // namespace zcx
