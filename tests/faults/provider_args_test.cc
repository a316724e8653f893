// Invalid arguments to every op of every built provider: NULL pointers, sizes that overflow,
// corrupt connection handles. Each must give an error code, never a crash.
#include "base/handle.h"
#include "base/registry.h"
#include "common/clock.h"
#include "transport/provider_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>

namespace zcx::test {
namespace {

class ProviderArgs : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ops_ = provider_find(GetParam());
    ASSERT_NE(ops_, nullptr);
    if (pc_.init(ops_, 0, 2, 99) != ZCX_SUCCESS)
      GTEST_SKIP() << GetParam() << " has no usable device here: " << zcx_get_last_error();
    int ndev = 0;
    ASSERT_EQ(ops_->devices(pc_.ctx, &ndev), ZCX_SUCCESS);
    if (ndev == 0) GTEST_SKIP() << GetParam() << " reports 0 devices";
  }
  // A real connection for the data-path checks (both ends in this process).
  void connect_self() {
    ASSERT_EQ(peer_.init(ops_, 1, 2, 99), ZCX_SUCCESS);
    ASSERT_EQ(connect_pair(pc_, peer_, &send_, &recv_), ZCX_SUCCESS) << zcx_get_last_error();
  }
  void TearDown() override {
    if (send_) (void)ops_->close_send(send_);
    if (recv_) (void)ops_->close_recv(recv_);
  }
  const zcx_provider_ops_t* ops_ = nullptr;
  ProviderCtx pc_, peer_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

TEST_P(ProviderArgs, SetupOpsRejectNull) {
  void* out = nullptr;
  int n = 0;
  zcx_device_props_t props;
  char handle[ZCX_HANDLE_BYTES] = {};
  EXPECT_NE(ops_->init(nullptr, &out), ZCX_SUCCESS);
  EXPECT_NE(ops_->finalize(nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->devices(nullptr, &n), ZCX_SUCCESS);
  EXPECT_NE(ops_->devices(pc_.ctx, nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->get_properties(pc_.ctx, 0, nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->get_properties(pc_.ctx, -1, &props), ZCX_SUCCESS);
  EXPECT_NE(ops_->get_properties(pc_.ctx, 1 << 20, &props), ZCX_SUCCESS);
  EXPECT_NE(ops_->listen(pc_.ctx, 0, nullptr, &out), ZCX_SUCCESS);
  EXPECT_NE(ops_->listen(pc_.ctx, 0, handle, nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->listen(pc_.ctx, -1, handle, &out), ZCX_SUCCESS);
  EXPECT_NE(ops_->connect(pc_.ctx, 0, nullptr, &out), ZCX_SUCCESS);
  EXPECT_NE(ops_->accept(nullptr, &out), ZCX_SUCCESS);
  EXPECT_NE(ops_->close_listen(nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->close_send(nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->close_recv(nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->test(nullptr, &n, nullptr), ZCX_SUCCESS);
  if (ops_->peer_info) {
    EXPECT_NE(ops_->peer_info(nullptr, nullptr), ZCX_SUCCESS);
  }
}

// Connect must refuse a corrupt handle at once (or fail within its bound), never crash.
TEST_P(ProviderArgs, CorruptHandlesAreRefused) {
  char good[ZCX_HANDLE_BYTES];
  void* listen = nullptr;
  ASSERT_EQ(ops_->listen(pc_.ctx, 0, good, &listen), ZCX_SUCCESS);
  std::mt19937 rng(7);
  std::vector<std::vector<char>> bad;
  bad.emplace_back(ZCX_HANDLE_BYTES, 0);  // all zero
  std::vector<char> noise(ZCX_HANDLE_BYTES);
  for (char& c : noise) c = static_cast<char>(rng());
  bad.push_back(noise);
  std::vector<char> h(good, good + ZCX_HANDLE_BYTES);
  h[5] ^= 0x7f;  // provider id
  bad.push_back(h);
  h.assign(good, good + ZCX_HANDLE_BYTES);
  h[6] = static_cast<char>(0xff);  // payload length beyond the handle
  h[7] = static_cast<char>(0xff);
  bad.push_back(h);
  h.assign(good, good + ZCX_HANDLE_BYTES);
  h[4] = 99;  // version
  bad.push_back(h);
  for (size_t i = 0; i < bad.size(); ++i) {
    void* send = nullptr;
    EXPECT_NE(ops_->connect(pc_.ctx, 0, bad[i].data(), &send), ZCX_SUCCESS) << "handle " << i;
    EXPECT_EQ(send, nullptr);
  }
  // Flipped payload bytes: may look valid; connect must then fail or stay bounded.
  for (int trial = 0; trial < 20; ++trial) {
    h.assign(good, good + ZCX_HANDLE_BYTES);
    size_t at = kHandleHeaderBytes + rng() % (ZCX_HANDLE_BYTES - kHandleHeaderBytes);
    h[at] = static_cast<char>(rng());
    void* send = nullptr;
    zcx_status_t st = ops_->connect(pc_.ctx, 0, h.data(), &send);
    if (st == ZCX_SUCCESS && send) (void)ops_->close_send(send);
  }
  EXPECT_EQ(ops_->close_listen(listen), ZCX_SUCCESS);
}

TEST_P(ProviderArgs, DataOpsRejectNullAndOverflow) {
  ASSERT_NO_FATAL_FAILURE(connect_self());
  void* req = reinterpret_cast<void*>(1);
  char byte = 0;
  void* buf = &byte;
  size_t huge = SIZE_MAX;
  size_t one = 1;
  int tag = 0;
  EXPECT_NE(ops_->isend(nullptr, &byte, 1, 0, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->isend(send_, nullptr, 16, 0, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->isend(send_, &byte, SIZE_MAX, 0, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->isend(send_, &byte, 1, 0, nullptr, nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->irecv(nullptr, 1, &buf, &one, &tag, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->irecv(recv_, 0, &buf, &one, &tag, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->irecv(recv_, -1, &buf, &one, &tag, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->irecv(recv_, 1 << 30, &buf, &one, &tag, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->irecv(recv_, 1, nullptr, &one, &tag, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->irecv(recv_, 1, &buf, nullptr, &tag, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->irecv(recv_, 1, &buf, &huge, &tag, nullptr, &req), ZCX_SUCCESS);
  EXPECT_NE(ops_->irecv(recv_, 1, &buf, &one, &tag, nullptr, nullptr), ZCX_SUCCESS);
  void* null_buf = nullptr;
  EXPECT_NE(ops_->irecv(recv_, 1, &null_buf, &one, &tag, nullptr, &req), ZCX_SUCCESS);
  void* mh = nullptr;
  EXPECT_NE(ops_->reg_mr(nullptr, &byte, 1, ZCX_MEM_HOST, &mh), ZCX_SUCCESS);
  EXPECT_NE(ops_->reg_mr(send_, &byte, 1, ZCX_MEM_HOST, nullptr), ZCX_SUCCESS);
  EXPECT_NE(ops_->reg_mr(send_, &byte, SIZE_MAX, ZCX_MEM_HOST, &mh), ZCX_SUCCESS);
  EXPECT_NE(ops_->dereg_mr(nullptr, nullptr), ZCX_SUCCESS);
  // The connection still works after all that.
  std::vector<void*> reqs(2);
  char in = 0, out = 42;
  void* inp = &in;
  if (ops_->flags & ZCX_PROVIDER_NEEDS_REG) return;  // data check needs registrations
  ASSERT_EQ(post_recv(ops_, recv_, 1, &inp, &one, &tag, nullptr, &reqs[0]), ZCX_SUCCESS);
  ASSERT_EQ(post_send(ops_, send_, &out, 1, 0, nullptr, &reqs[1]), ZCX_SUCCESS);
  ASSERT_EQ(wait_requests(ops_, reqs, nullptr), ZCX_SUCCESS) << zcx_get_last_error();
  EXPECT_EQ(in, 42);
}

std::vector<std::string> built() {
  std::vector<std::string> names;
  for (const zcx_provider_ops_t* ops : providers_built()) names.push_back(ops->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Providers, ProviderArgs, ::testing::ValuesIn(built()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ProviderArgs);

}  // namespace
}  // namespace zcx::test
