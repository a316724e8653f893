// The ib provider where RDMA is absent: no devices (this VM), or no libibverbs at all
// (ZCX_IB_LIBRARY names a library that does not exist). init succeeds, devices() is 0, an
// INFO line says why, and nothing else in zcx is affected. Runs in its own process per test
// because the loaded libibverbs is process-wide.
#include "base/provider.h"
#include "base/registry.h"
#include "common/config.h"
#include "common/dl/ibv_shim.h"
#include "common/log.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

extern "C" const zcx_provider_ops_t* zcx_provider_ib(void);

namespace {

std::mutex g_mu;
std::vector<std::string> g_lines;

void capture(zcx::LogLevel, uint32_t, const char*, int, const char* msg) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_lines.emplace_back(msg);
}

bool logged(const std::string& needle) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const std::string& l : g_lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

int ib_devices() {
  const zcx_provider_ops_t* ops = zcx_provider_ib();
  zcx_provider_init_t self{};
  self.size = sizeof self;
  self.rank = 0;
  snprintf(self.host, sizeof self.host, "h");
  void* ctx = nullptr;
  EXPECT_EQ(ops->init(&self, &ctx), ZCX_SUCCESS);
  int n = -1;
  EXPECT_EQ(ops->devices(ctx, &n), ZCX_SUCCESS);
  EXPECT_EQ(ops->finalize(ctx), ZCX_SUCCESS);
  return n;
}

class IbNoDevice : public testing::Test {
 protected:
  void SetUp() override {
    zcx::log_set_sink(capture);
    zcx::config::set_override("ZCX_DEBUG", "INFO");
    zcx::log_reload();
  }
  void TearDown() override {
    zcx::config::clear_override("ZCX_DEBUG");
    zcx::log_set_sink(nullptr);
    zcx::log_reload();
  }
};

TEST_F(IbNoDevice, LibibverbsAbsentMeansNoDevicesAndAnInfoLine) {
  zcx::config::ScopedOverride lib("ZCX_IB_LIBRARY", "libibverbs-absent-for-test.so.1");
  EXPECT_EQ(ib_devices(), 0);
  EXPECT_TRUE(logged("no RDMA devices")) << "no INFO line saying why";
  EXPECT_TRUE(logged("libibverbs-absent-for-test.so.1"));
  EXPECT_EQ(zcx::ibv_shim(), nullptr) << "libibverbs must stay unloaded";
  // The provider is still listed and the others are unaffected.
  EXPECT_NE(zcx::provider_find("ib"), nullptr);
}

TEST_F(IbNoDevice, FilterMatchingNothingMeansNoDevices) {
  zcx::config::ScopedOverride hca("ZCX_IB_HCA", "=no_such_hca_for_test");
  EXPECT_EQ(ib_devices(), 0);
  EXPECT_TRUE(logged("no RDMA devices")) << "no INFO line saying why";
}

// On a machine without RDMA hardware (the dev/CI VM outside the guest) the real library
// loads and reports no devices cleanly.
TEST_F(IbNoDevice, RealLibraryWithoutHardwareReportsNoDevices) {
  int n = ib_devices();
  if (n > 0) GTEST_SKIP() << "this machine has " << n << " RDMA device(s)";
  EXPECT_TRUE(logged("no RDMA devices"));
}

}  // namespace
