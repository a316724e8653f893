// Helpers for the in-process collective tests: blocking run, deterministic data.
#pragma once

#include "core/comm.h"
#include "fake_transport.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zcx::coll::fake {

// Posts and waits; with expect_algo, also checks which algorithm the planner used.
inline Status run_op(Comm& c, const OpArgs& a, const char* expect_algo = nullptr) {
  std::shared_ptr<Op> op;
  ZCX_TRY(c.post(a, &op));
  if (expect_algo) {
    EXPECT_STREQ(algo_name(static_cast<Algo>(op->desc.algo)), expect_algo);
  }
  return c.wait(*op);
}

// An int32 call of `count` elements (op, root and the rest at their defaults).
inline OpArgs int32_args(CollKind k, const void* s, void* r, size_t count) {
  OpArgs a;
  a.kind = k;
  a.sendbuf = s;
  a.recvbuf = r;
  a.count = count;
  a.dtype = ZCX_INT32;
  return a;
}

// Rank r's element i: distinct per rank and index, wraps like int32.
inline int32_t val(int rank, size_t i) {
  return static_cast<int32_t>(static_cast<uint32_t>(rank + 1) * 7919u + static_cast<uint32_t>(i) * 2654435761u);
}

inline int32_t sum_over_ranks(int n, size_t i) {
  uint32_t s = 0;
  for (int r = 0; r < n; ++r) s += static_cast<uint32_t>(val(r, i));
  return static_cast<int32_t>(s);
}

inline const int kRankCounts[] = {1, 2, 3, 4, 5, 8};

inline std::vector<size_t> test_counts(int n) {
  return {0, 1, static_cast<size_t>(n > 1 ? n - 1 : 2), static_cast<size_t>(n + 1), 1000003};
}

// First index where got differs from want, as a gtest assertion.
inline ::testing::AssertionResult same_ints(const std::vector<int32_t>& want, const int32_t* got,
                                            size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (want[i] != got[i])
      return ::testing::AssertionFailure() << "element " << i << " of " << n << ": want "
                                           << want[i] << " got " << got[i];
  return ::testing::AssertionSuccess();
}

}  // namespace zcx::coll::fake
