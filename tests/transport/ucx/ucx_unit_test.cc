// Unit: with the UCX library hidden the provider reports 0 devices cleanly, and its other
// operations fail with "no device" instead of crashing.
#include "ucx_test_util.h"

#include "common/config.h"

#include <gtest/gtest.h>

namespace zcx::ucx_test {
namespace {

TEST(UcxNoLibrary, ReportsZeroDevices) {
  config::ScopedOverride hide("ZCX_UCX_LIBRARY", "/nonexistent/libucp.so.0");
  const zcx_provider_ops_t* ops = zcx_provider_ucx();
  ASSERT_NE(ops, nullptr);
  EXPECT_STREQ(ops->name, "ucx");
  EXPECT_EQ(ops->id, ZCX_PROVIDER_ID_UCX);
  zcx_provider_init_t init{};
  init.size = sizeof(init);
  init.rank = 0;
  init.nranks = 1;
  void* ctx = nullptr;
  ASSERT_EQ(ops->init(&init, &ctx), ZCX_SUCCESS);
  int ndev = -1;
  ASSERT_EQ(ops->devices(ctx, &ndev), ZCX_SUCCESS);
  EXPECT_EQ(ndev, 0);
  uint8_t handle[ZCX_HANDLE_BYTES];
  void* lc = nullptr;
  EXPECT_EQ(ops->listen(ctx, 0, handle, &lc), ZCX_ERR_NO_DEVICE);
  EXPECT_EQ(lc, nullptr);
  EXPECT_NE(std::string(zcx_get_last_error()).find("nonexistent"), std::string::npos)
      << zcx_get_last_error();
  EXPECT_EQ(ops->finalize(ctx), ZCX_SUCCESS);
}

TEST(UcxHandle, ConnectRejectsForeignHandle) {
  const zcx_provider_ops_t* ops = zcx_provider_ucx();
  std::string why;
  if (!ucx_available(&why)) GTEST_SKIP() << "UCX unusable here: " << why;
  zcx_provider_init_t init{};
  init.size = sizeof(init);
  void* ctx = nullptr;
  ASSERT_EQ(ops->init(&init, &ctx), ZCX_SUCCESS);
  uint8_t junk[ZCX_HANDLE_BYTES] = {1, 2, 3};
  void* sc = nullptr;
  EXPECT_EQ(ops->connect(ctx, 0, junk, &sc), ZCX_ERR_INVALID_ARG);
  EXPECT_EQ(sc, nullptr);
  EXPECT_EQ(ops->finalize(ctx), ZCX_SUCCESS);
}

}  // namespace
}  // namespace zcx::ucx_test
