#include "common/config.h"
#include "common/config_vars.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace zcx::config {
namespace {

const IntParam test_int{"ZCX_TEST_INT", 7, "test only", 0, 100};
const SizeParam test_size{"ZCX_TEST_SIZE", 4096, "test only"};
const BoolParam test_bool{"ZCX_TEST_BOOL", false, "test only"};
const StringParam test_str{"ZCX_TEST_STR", "abc", "test only"};

TEST(Config, DefaultsWhenUnset) {
  unsetenv("ZCX_TEST_INT");
  EXPECT_EQ(test_int.get(), 7);
  EXPECT_EQ(test_size.get(), 4096u);
  EXPECT_FALSE(test_bool.get());
  EXPECT_EQ(test_str.get(), "abc");
}

TEST(Config, EnvironmentOverridesDefault) {
  setenv("ZCX_TEST_INT", "42", 1);
  EXPECT_EQ(test_int.get(), 42);
  unsetenv("ZCX_TEST_INT");
}

TEST(Config, BadOrOutOfRangeValuesFallBackToDefault) {
  for (const char* bad : {"abc", "", "101", "-1", "99999999999999999999999", "4x"}) {
    setenv("ZCX_TEST_INT", bad, 1);
    EXPECT_EQ(test_int.get(), 7) << bad;
  }
  unsetenv("ZCX_TEST_INT");
  std::string huge(65536, '9');
  setenv("ZCX_TEST_SIZE", huge.c_str(), 1);
  EXPECT_EQ(test_size.get(), 4096u);
  unsetenv("ZCX_TEST_SIZE");
}

TEST(Config, SizeSuffixes) {
  EXPECT_EQ(parse_size("64K"), 65536u);
  EXPECT_EQ(parse_size("2M"), 2u << 20);
  EXPECT_EQ(parse_size("1G"), 1u << 30);
  EXPECT_EQ(parse_size("3MB"), 3u << 20);
  EXPECT_FALSE(parse_size("-5"));
  EXPECT_FALSE(parse_size("5Q"));
  EXPECT_FALSE(parse_size("99999999999999999999G"));
}

TEST(Config, Booleans) {
  for (const char* t : {"1", "y", "yes", "TRUE", "on"}) EXPECT_EQ(parse_bool(t), true) << t;
  for (const char* f : {"0", "n", "No", "false", "OFF"}) EXPECT_EQ(parse_bool(f), false) << f;
  EXPECT_FALSE(parse_bool("maybe"));
}

TEST(Config, ScopedOverrideWinsOverEnvironment) {
  setenv("ZCX_TEST_STR", "env", 1);
  {
    ScopedOverride o("ZCX_TEST_STR", "override");
    EXPECT_EQ(test_str.get(), "override");
  }
  EXPECT_EQ(test_str.get(), "env");
  unsetenv("ZCX_TEST_STR");
}

TEST(Config, RegistryListsCoreVariablesWithHelp) {
  for (const char* name : {"ZCX_TIMEOUT", "ZCX_DEBUG", "ZCX_DEBUG_SUBSYS", "ZCX_DEBUG_FILE",
                           "ZCX_PROVIDERS", "ZCX_SOCKET_IFNAME", "ZCX_RANK", "ZCX_ROOT"}) {
    const ParamBase* p = find(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_GT(strlen(p->help()), 10u) << name;
  }
  size_t n = 0;
  std::string prev;
  for_each([&](const ParamBase& p) {
    EXPECT_LT(prev, p.name());
    prev = p.name();
    ++n;
  });
  EXPECT_GE(n, 12u);
}

TEST(Config, UnknownVariablesAreCounted) {
  setenv("ZCX_TIMEOUTT", "5", 1);
  EXPECT_GE(warn_unknown_env(), 1u);
  unsetenv("ZCX_TIMEOUTT");
}

TEST(Config, TimeoutMilliseconds) {
  ScopedOverride o("ZCX_TIMEOUT", "2.5");
  EXPECT_EQ(params::timeout_ms(), 2500);
  ScopedOverride o2("ZCX_TIMEOUT", "-3");
  EXPECT_EQ(params::timeout_ms(), 1);
}

}  // namespace
}  // namespace zcx::config
