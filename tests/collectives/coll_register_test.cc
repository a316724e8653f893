// Registrations as the collectives make them, over the in-process fake provider "fakelocal"
// (it needs registrations and counts them; ranks are threads): an operation registers each
// of its buffers once per connection and gives them back when it ends, so the same buffer
// in the next operation is registered again (the caller may have freed it in between);
// zcx_comm_register keeps one registration for every operation until zcx_comm_deregister.
// The sums are checked each time.
#include "base/api_internal.h"
#include "bootstrap/fake_provider.h"
#include "bootstrap/test_util.h"
#include "common/config.h"

#include <gtest/gtest.h>
#include <zcx/coll.h>
#include <zcx/zcx.h>

#include <atomic>
#include <string>
#include <vector>

namespace zcx::test {
namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 1 << 16;  // int32 elements: many ring chunks
constexpr int kOps = 4;

// Each rank: kOps allreduces of one buffer, registered first when `registered`.
void allreduce_rank(int rank, const zcx_unique_id_t& id, bool registered,
                    std::atomic<int>* failures) {
  auto fail = [&](const std::string& what) {
    ADD_FAILURE() << "rank " << rank << ": " << what << ": " << zcx_get_last_error();
    ++*failures;
  };
  zcx_context_t ctx = nullptr;
  zcx_comm_t comm = nullptr;
  if (zcx_init_rank(&ctx, kRanks, &id, rank) != ZCX_SUCCESS ||
      zcx_comm_init_context(&comm, ctx, nullptr) != ZCX_SUCCESS)
    return fail("init");
  std::vector<int32_t> buf(kCount);
  void* handle = nullptr;
  if (registered && zcx_comm_register(comm, buf.data(), buf.size() * 4, &handle) != ZCX_SUCCESS)
    return fail("zcx_comm_register");
  for (int op = 0; op < kOps; ++op) {
    for (size_t i = 0; i < kCount; ++i) buf[i] = rank + op + static_cast<int32_t>(i % 5);
    if (zcx_allreduce(buf.data(), buf.data(), kCount, ZCX_INT32, ZCX_SUM, comm, nullptr))
      return fail("allreduce");
    for (size_t i = 0; i < kCount; ++i)
      if (buf[i] != 3 + kRanks * (op + static_cast<int32_t>(i % 5)))
        return fail("element " + std::to_string(i) + " of op " + std::to_string(op));
  }
  if (registered && zcx_comm_deregister(comm, handle) != ZCX_SUCCESS) fail("zcx_comm_deregister");
  if (registered && zcx_comm_deregister(comm, handle) != ZCX_ERR_INVALID_ARG)
    fail("a second zcx_comm_deregister of the handle was not refused");
  if (zcx_comm_destroy(comm) != ZCX_SUCCESS || zcx_finalize(ctx) != ZCX_SUCCESS) fail("teardown");
}

class CollRegister : public ::testing::Test {
 protected:
  void SetUp() override { api_set_context_options(&options_); }
  void TearDown() override { api_set_context_options(nullptr); }

  // Registrations made by a job of kRanks threads.
  int run_job(bool registered) {
    const int before = fake_stats().registrations.load();
    zcx_unique_id_t id{};
    {
      config::ScopedOverride lo("ZCX_SOCKET_IFNAME", "lo");
      EXPECT_EQ(zcx_get_unique_id(&id), ZCX_SUCCESS) << zcx_get_last_error();
    }
    std::atomic<int> failures{0};
    run_threads(kRanks, [&](int r) { allreduce_rank(r, id, registered, &failures); });
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(fake_stats().registrations.load(), fake_stats().deregistrations.load())
        << "registrations left behind";
    return fake_stats().registrations.load() - before;
  }

  ContextOptions options_{{fake_local_provider()}, "one-host"};
  config::ScopedOverride ring_{"ZCX_ALGO", "allreduce:ring"};
  config::ScopedOverride lane_{"ZCX_COLL_SHARED_LANE", "0"};
  config::ScopedOverride bulk_{"ZCX_COLL_SHARED_BULK", "0"};
};

TEST_F(CollRegister, OperationsRegisterPerOperationUnlessTheBufferIsRegistered) {
  const int per_op = run_job(false);
  const int kept = run_job(true);
  std::printf("%d allreduces of one buffer: %d registrations; with zcx_comm_register: %d\n",
              kOps, per_op, kept);
  EXPECT_GT(per_op, 0);
  EXPECT_LT(kept, per_op);
  // Registered, the user's buffer is registered once on each of a rank's two ring
  // connections for all operations instead of once per operation; scratch is still renewed
  // per operation (descriptors go through the context's own blocks).
  EXPECT_EQ(per_op - kept, kRanks * 2 * (kOps - 1));
}

}  // namespace
}  // namespace zcx::test
