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
const SizeParam test_ranged_size{"ZCX_TEST_RANGED_SIZE", 8192, "test only", 4096, 64u << 20};
const DoubleParam test_ranged_double{"ZCX_TEST_RANGED_DOUBLE", 2.5, "test only", 0.001, 1e9};

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

// A zero or negative timeout once meant 1 ms, so ZCX_TIMEOUT=0 ("no timeout" elsewhere)
// failed every wait at once; now it is out of range and the default (300 s) holds.
TEST(Config, TimeoutMilliseconds) {
  ScopedOverride o("ZCX_TIMEOUT", "2.5");
  EXPECT_EQ(params::timeout_ms(), 2500);
  for (const char* bad : {"-3", "0", "nan", "inf", "1e300"}) {
    ScopedOverride o2("ZCX_TIMEOUT", bad);
    EXPECT_EQ(params::timeout_ms(), 300000) << bad;
  }
}

TEST(Config, RangesHoldAndAreShown) {
  EXPECT_STREQ(test_ranged_size.range_text(), "[4K, 64M]");
  EXPECT_STREQ(test_ranged_double.range_text(), "[0.001, 1e+09]");
  EXPECT_STREQ(test_int.range_text(), "[0, 100]");
  EXPECT_STREQ(test_size.range_text(), "") << "no bounds: nothing to show";
  for (const char* bad : {"4095", "65M", "0"}) {
    ScopedOverride o("ZCX_TEST_RANGED_SIZE", bad);
    EXPECT_EQ(test_ranged_size.get(), 8192u) << bad;
  }
  for (const char* good : {"4K", "64M", "1M"}) {
    ScopedOverride o("ZCX_TEST_RANGED_SIZE", good);
    EXPECT_EQ(test_ranged_size.get(), *parse_size(good)) << good;
  }
  for (const char* bad : {"0", "-1", "nan", "inf", "2e9"}) {
    ScopedOverride o("ZCX_TEST_RANGED_DOUBLE", bad);
    EXPECT_EQ(test_ranged_double.get(), 2.5) << bad;
  }
  ScopedOverride o("ZCX_TEST_RANGED_DOUBLE", "0.5");
  EXPECT_EQ(test_ranged_double.get(), 0.5);
}

}  // namespace
}  // namespace zcx::config
