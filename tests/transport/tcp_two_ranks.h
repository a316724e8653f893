// A fixture for the in-process tcp tests: two tcp provider contexts in this process, ranks
// 0 (a_) and 1 (b_) of one job, driven alternately by the test's own thread.
#pragma once

#include "base/registry.h"
#include "transport/provider_util.h"

#include <gtest/gtest.h>

namespace zcx::test {

class TcpTwoRanks : public ::testing::Test {
 protected:
  static constexpr uint64_t kSecret = 0x1234abcd5678ef01ull;

  void SetUp() override {
    ops_ = provider_find("tcp");
    ASSERT_NE(ops_, nullptr) << "tcp provider not built";
    ASSERT_EQ(a_.init(ops_, 0, 2, kSecret), ZCX_SUCCESS) << zcx_get_last_error();
    ASSERT_EQ(b_.init(ops_, 1, 2, kSecret), ZCX_SUCCESS) << zcx_get_last_error();
  }

  const zcx_provider_ops_t* ops_ = nullptr;
  ProviderCtx a_, b_;
};

}  // namespace zcx::test
