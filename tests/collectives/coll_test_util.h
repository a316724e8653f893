// Helpers for the in-process collective tests: blocking run, deterministic data.
#pragma once

#include "core/comm.h"
#include "fake_transport.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
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

// Every rank's elements val(r, 0..count-1), made once for all the runs of a count.
inline std::vector<std::vector<int32_t>> every_rank_values(int n, size_t count) {
  std::vector<std::vector<int32_t>> v(static_cast<size_t>(n), std::vector<int32_t>(count));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) v[r][i] = val(r, i);
  return v;
}

// Per-rank send and receive buffers for all the runs of one count, made once: a fresh
// multi-megabyte vector in every run pays its page faults again (under ThreadSanitizer also its
// shadow's, each with a TLB shootdown), which were most of these tests' time. Rank r's thread
// touches only its own pair.
class RankBuffers {
 public:
  RankBuffers(int n, size_t in_count, size_t out_count)
      : in_(static_cast<size_t>(n), std::vector<int32_t>(in_count)),
        out_(static_cast<size_t>(n), std::vector<int32_t>(out_count)) {}
  // Rank r's send buffer, holding `from` (as many elements as the buffer).
  int32_t* in(int r, const std::vector<int32_t>& from) {
    std::vector<int32_t>& v = in_[static_cast<size_t>(r)];
    // An empty vector's data() may be NULL, which memcpy and memset never take (UBSan).
    if (!v.empty()) std::memcpy(v.data(), from.data(), v.size() * sizeof(int32_t));
    return v.data();
  }
  // Rank r's receive buffer, every element -1 (all bits set).
  int32_t* out(int r) {
    std::vector<int32_t>& v = out_[static_cast<size_t>(r)];
    if (!v.empty()) std::memset(v.data(), 0xff, v.size() * sizeof(int32_t));
    return v.data();
  }

 private:
  std::vector<std::vector<int32_t>> in_, out_;
};

// First index where got differs from want, as a gtest assertion (one memcmp when none does).
inline ::testing::AssertionResult same_ints(const std::vector<int32_t>& want, const int32_t* got,
                                            size_t n) {
  if (n == 0 || std::memcmp(want.data(), got, n * sizeof(int32_t)) == 0)
    return ::testing::AssertionSuccess();
  for (size_t i = 0; i < n; ++i)
    if (want[i] != got[i])
      return ::testing::AssertionFailure() << "element " << i << " of " << n << ": want "
                                           << want[i] << " got " << got[i];
  return ::testing::AssertionSuccess();
}

}  // namespace zcx::coll::fake
