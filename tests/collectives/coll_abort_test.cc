// zcx_comm_abort from another thread while the owner is blocked inside a call, as a
// watchdog would do it: 2 forked ranks, rank 1 never calls (it sleeps, then leaves), rank 0
// blocks in an allreduce and a second thread aborts the communicator. The abort returns
// promptly, the blocked call returns ZCX_ERR_ABORTED promptly (not after ZCX_TIMEOUT), and a
// later call on the handle is refused with an error instead of touching freed memory. Once
// over a communicator that owns its context (zcx_comm_init_env) and once over one that does
// not (zcx_comm_init_context), where only the communicator's own abort flag ends the wait.
#include "process_ranks.h"
#include "common/config.h"

#include <gtest/gtest.h>
#include <zcx/coll.h>
#include <zcx/zcx.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace zcx::test {
namespace {

constexpr double kAbortAfterS = 0.5;
constexpr double kPromptS = 2.0;  // far below ZCX_TIMEOUT (20 s here)

struct Comm {
  zcx_context_t ctx = nullptr;  // set when the communicator does not own its context
  zcx_comm_t comm = nullptr;
};

bool make_comm(bool owns_context, Comm* c, int fd) {
  zcx_status_t st = owns_context ? zcx_comm_init_env(&c->comm, nullptr)
                                 : zcx_init_from_env(&c->ctx);
  if (st == ZCX_SUCCESS && !owns_context) st = zcx_comm_init_context(&c->comm, c->ctx, nullptr);
  if (st != ZCX_SUCCESS) dprintf(fd, "INIT failed: %s\n", zcx_get_last_error());
  return st == ZCX_SUCCESS;
}

// Rank 0 reports "RESULT <call status> <call s> <abort status> <abort s> <later status>".
int abort_rank(int rank, int fd, bool owns_context) {
  Comm c;
  if (!make_comm(owns_context, &c, fd)) return 2;
  if (rank == 1) {  // never joins the allreduce
    std::this_thread::sleep_for(std::chrono::seconds(4));
    return 0;
  }
  std::vector<float> v(1 << 16, 1.0f);
  std::atomic<int> abort_st{-1};
  std::atomic<double> abort_s{-1};
  const double t0 = monotonic_s();
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(kAbortAfterS));
    const double a0 = monotonic_s();
    abort_st = zcx_comm_abort(c.comm);
    abort_s = monotonic_s() - a0;
  });
  auto allreduce = [&] {
    return zcx_allreduce(v.data(), v.data(), v.size(), ZCX_FLOAT32, ZCX_SUM, c.comm, nullptr);
  };
  zcx_status_t st = allreduce();
  const double call_s = monotonic_s() - t0;
  watchdog.join();
  zcx_status_t later = allreduce();
  dprintf(fd, "RESULT %d %.3f %d %.3f %d\n", static_cast<int>(st), call_s, abort_st.load(),
          abort_s.load(), static_cast<int>(later));
  if (c.ctx) (void)zcx_finalize(c.ctx);
  return 0;
}

void expect_prompt_abort(bool owns_context) {
  CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", "20");
  std::vector<RankResult> res = run_rank_processes(
      2, 60 * 1000, [&](int rank, int fd) { return abort_rank(rank, fd, owns_context); });
  SCOPED_TRACE("rank 0: " + res[0].report + "\nrank 1: " + res[1].report);
  ASSERT_EQ(res[0].exit_code, 0);
  EXPECT_EQ(res[1].exit_code, 0);
  int st = -1, abort_st = -1, later = -1;
  double call_s = -1, abort_s = -1;
  ASSERT_EQ(sscanf(res[0].report.c_str(), "RESULT %d %lf %d %lf %d", &st, &call_s, &abort_st,
                   &abort_s, &later), 5);
  std::printf("rank 0: %s", res[0].report.c_str());
  EXPECT_EQ(st, ZCX_ERR_ABORTED) << "the blocked allreduce";
  EXPECT_LT(call_s, kAbortAfterS + kPromptS) << "the blocked call did not end with the abort";
  EXPECT_EQ(abort_st, ZCX_SUCCESS);
  EXPECT_LT(abort_s, kPromptS) << "zcx_comm_abort did not return promptly";
  EXPECT_EQ(later, ZCX_ERR_INVALID_ARG) << "a call on the aborted handle";
}

TEST(CommAbort, FromAnotherThreadEndsABlockedCallOwningItsContext) { expect_prompt_abort(true); }

TEST(CommAbort, FromAnotherThreadEndsABlockedCallOnASharedContext) { expect_prompt_abort(false); }

}  // namespace
}  // namespace zcx::test
