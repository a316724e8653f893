// Correctness matrix of the collectives over real processes, shm and tcp: every kind x
// forced algorithm x dtype x op x count x in place / out of place x root, in groups of
// N = 1, 2, 3, 4, 5, 8 processes that each make their communicator once and run all cases
// of the group. Tiers, counts and the float tolerances per algorithm: matrix/matrix_cases.h
// and matrix/matrix_data.h. ZCX_TEST_FULL_MATRIX=1 runs the whole product (hours; not CI).
#include "process_ranks.h"

#include "base/registry.h"
#include "common/config.h"
#include "matrix/matrix_cases.h"
#include "matrix/matrix_data.h"
#include "matrix/matrix_run.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <iterator>
#include <ostream>
#include <set>
#include <sstream>

namespace zcx::coll::matrix {
namespace {

const config::BoolParam kFullMatrix("ZCX_TEST_FULL_MATRIX", false,
                                    "tests: the collective matrix runs its full product (all "
                                    "counts, 8 Mi included, in every group; hours)");

bool provider_built(const char* name) {
  test::ScopedEnv only("ZCX_PROVIDERS", name);
  return !providers_selected().empty();
}

// Prints the rank's DONE and SKIP lines and adds one failure per FAIL/ERROR line (the first 40).
void collect(int rank, const test::RankResult& res, int* shown) {
  std::istringstream lines(res.report);
  std::string line;
  bool done = false;
  while (std::getline(lines, line)) {
    if (line.rfind("DONE", 0) == 0 || line.rfind("SKIP", 0) == 0) {
      printf("  %s\n", line.c_str());
      done = done || line.rfind("DONE", 0) == 0;
    } else if (!line.empty() && (*shown)++ < 40) {
      ADD_FAILURE() << line;
    }
  }
  EXPECT_TRUE(done) << "rank " << rank << " did not finish (exit " << res.exit_code << ")";
  EXPECT_EQ(res.exit_code, 0) << "rank " << rank;
}

struct GroupParam {
  const char* provider;
  int nranks;
};

// What gtest prints for a group (and ctest's test names carry), rather than its bytes.
void PrintTo(const GroupParam& p, std::ostream* os) { *os << p.provider << ", n=" << p.nranks; }

class CollMatrix : public ::testing::TestWithParam<GroupParam> {};

TEST_P(CollMatrix, EveryCaseOfTheGroup) {
  const GroupParam p = GetParam();
  if (!provider_built(p.provider)) GTEST_SKIP() << p.provider << " is not built in this tree";
  test::CleanLaunchEnv clean;
  config::ScopedOverride timeout("ZCX_TIMEOUT", "60");
  const bool full = kFullMatrix.get();
  std::vector<Case> cases = cases_for(p.provider, p.nranks, full);
  size_t large = 0;
  for (const Case& c : cases) large += c.large;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<test::RankResult> results = test::run_rank_processes(
      p.nranks, full ? 48 * 3600 * 1000 : 280 * 1000,
      [&](int rank, int fd) { return run_group_rank(p.provider, rank, p.nranks, cases, fd); });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("[matrix] %s N=%d: %zu cases (%zu large) in %.1f s wall\n", p.provider, p.nranks,
         cases.size(), large, wall);
  int shown = 0;
  for (int r = 0; r < p.nranks; ++r) collect(r, results[r], &shown);
}

std::vector<GroupParam> all_groups() {
  std::vector<GroupParam> out;
  for (const char* prov : kProviders)
    for (int n : kGroupSizes) out.push_back({prov, n});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Groups, CollMatrix, ::testing::ValuesIn(all_groups()),
                         [](const ::testing::TestParamInfo<GroupParam>& info) {
                           return std::string(info.param.provider) + "_np" +
                                  std::to_string(info.param.nranks);
                         });

// The checker itself: with one rank the exact result is that rank's input, which passes for
// every dtype and op; the same buffer with one element's low bit flipped fails, by index.
TEST(MatrixData, CheckerAcceptsExactAndCatchesOneBadElement) {
  const size_t count = 1000;
  for (int dt = 0; dt < ZCX_DTYPE_COUNT; ++dt)
    for (int op = 0; op < ZCX_REDOP_COUNT; ++op) {
      const auto dtype = static_cast<zcx_dtype_t>(dt);
      const auto redop = static_cast<zcx_redop_t>(op);
      std::vector<uint8_t> got(count * zcx_dtype_size(dtype));
      fill_input(dtype, redop, 7, 0, 0, count, got.data());
      EXPECT_EQ(check_reduced(dtype, redop, 7, 1, 0, 0, count, got.data()), "");
      EXPECT_EQ(check_copied(dtype, redop, 7, 0, 0, count, got.data()), "");
      got[zcx_dtype_size(dtype) * 417] ^= 1;
      const std::string bad = check_reduced(dtype, redop, 7, 1, 0, 0, count, got.data());
      EXPECT_NE(bad.find("index 417"), std::string::npos) << zcx_dtype_name(dtype) << bad;
      EXPECT_NE(bad.find("1 of 1000 wrong"), std::string::npos) << bad;
      EXPECT_NE(check_copied(dtype, redop, 7, 0, 0, count, got.data()), "");
    }
}

// The rotation of the large tier reaches every value it promises to (matrix_cases.h).
TEST(LargeTier, RotationCoversEveryValue) {
  std::set<int> dtypes, ops, roots, nranks;
  std::set<std::string> providers, combos;
  for (const PlacedCase& p : large_tier()) {
    const Case& c = p.c;
    dtypes.insert(c.dtype);
    if (reduces(c.kind)) ops.insert(c.op);
    if (rooted(c.kind)) roots.insert(c.root);
    nranks.insert(p.group.nranks);
    providers.insert(p.group.provider);
    combos.insert(std::string(coll_kind_name(c.kind)) + algo_name(c.algo) +
                  (c.emulated_hosts ? "e" : "") + (c.in_place ? "i" : "o") + std::to_string(p.nominal_count));
    EXPECT_TRUE(c.large);
    if (rooted(c.kind)) {
      EXPECT_LT(c.root, p.group.nranks);
    }
  }
  EXPECT_EQ(dtypes.size(), static_cast<size_t>(ZCX_DTYPE_COUNT));
  EXPECT_EQ(ops.size(), static_cast<size_t>(ZCX_REDOP_COUNT));
  EXPECT_EQ(roots.size(), 8u);  // every root of the largest group
  EXPECT_EQ(nranks.size(), std::size(kGroupSizes));
  EXPECT_EQ(providers.size(), 2u);
  // Every kind x algorithm x in/out of place x large count.
  size_t expected = 0;
  for (int k = 0; k < static_cast<int>(CollKind::kCount); ++k) {
    CollKind kind = static_cast<CollKind>(k);
    if (kind == CollKind::kBarrier) continue;
    Algo cand[8];
    int nc = candidates(kind, cand, 8);
    for (int i = 0; i < nc; ++i) expected += (cand[i] == Algo::kHier ? 2 : 1) * (kind == CollKind::kSendRecv ? 2 : 4);
  }
  EXPECT_EQ(combos.size(), expected);
}

}  // namespace
}  // namespace zcx::coll::matrix
