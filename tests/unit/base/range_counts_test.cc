// RangeCounts: counts per range, and the containment query against a plain scan of every
// range (what the context did before), on random nested and overlapping ranges.
#include "base/range_counts.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace zcx {
namespace {

using Range = RangeCounts::Range;

// The reference: the first range in (start, length) order that holds [lo, lo + size).
bool scan_all(const std::vector<Range>& ranges, uintptr_t lo, size_t size, Range* out) {
  bool found = false;
  for (const Range& r : ranges) {
    bool holds = lo >= r.first && lo - r.first <= r.second && size <= r.second - (lo - r.first);
    if (holds && (!found || r < *out)) {
      *out = r;
      found = true;
    }
  }
  return found;
}

TEST(RangeCounts, CountsUsesPerRange) {
  RangeCounts rc;
  EXPECT_EQ(rc.remove({0x1000, 64}), -1);
  rc.add({0x1000, 64});
  rc.add({0x1000, 64});
  EXPECT_TRUE(rc.contains({0x1000, 64}));
  EXPECT_FALSE(rc.contains({0x1000, 32}));
  EXPECT_EQ(rc.remove({0x1000, 64}), 1);
  EXPECT_TRUE(rc.contains({0x1000, 64}));
  EXPECT_EQ(rc.remove({0x1000, 64}), 0);
  EXPECT_FALSE(rc.contains({0x1000, 64}));
  EXPECT_TRUE(rc.empty());
}

// One huge range (a whole allocation held for a while) widens the window of every query
// only while it is there.
TEST(RangeCounts, TheWindowNarrowsWhenTheLongestRangeGoes) {
  RangeCounts rc;
  rc.add({0x10000, 64});
  rc.add({0x20000, 4096});
  rc.add({0x100000, size_t{1} << 30});
  EXPECT_EQ(rc.longest(), size_t{1} << 30);
  EXPECT_EQ(rc.remove({0x100000, size_t{1} << 30}), 0);
  EXPECT_EQ(rc.longest(), 4096u);
  Range r;
  EXPECT_TRUE(rc.covering(0x20010, 16, &r));
  EXPECT_EQ(r, (Range{0x20000, 4096}));
  EXPECT_FALSE(rc.covering(0x100000, 16, &r));
  EXPECT_EQ(rc.remove({0x20000, 4096}), 0);
  EXPECT_EQ(rc.longest(), 64u);
  EXPECT_EQ(rc.remove({0x10000, 64}), 0);
  EXPECT_EQ(rc.longest(), 0u);
}

TEST(RangeCounts, EdgesOfARange) {
  RangeCounts rc;
  rc.add({0x1000, 0x100});
  Range r;
  EXPECT_TRUE(rc.covering(0x1000, 0x100, &r));
  EXPECT_EQ(r, (Range{0x1000, 0x100}));
  EXPECT_TRUE(rc.covering(0x10ff, 1, &r));
  EXPECT_TRUE(rc.covering(0x1100, 0, &r));   // an empty transfer at the end
  EXPECT_FALSE(rc.covering(0x1000, 0x101, &r));
  EXPECT_FALSE(rc.covering(0x0fff, 2, &r));
  EXPECT_FALSE(rc.covering(0x1100, 1, &r));
}

TEST(RangeCounts, NearTheEndsOfTheAddressSpace) {
  RangeCounts rc;
  rc.add({0, 16});
  rc.add({UINTPTR_MAX - 15, 15});
  Range r;
  EXPECT_TRUE(rc.covering(0, 16, &r));
  EXPECT_TRUE(rc.covering(UINTPTR_MAX - 15, 15, &r));
  EXPECT_FALSE(rc.covering(UINTPTR_MAX - 15, 16, &r));
  EXPECT_FALSE(rc.covering(UINTPTR_MAX, SIZE_MAX, &r));
}

TEST(RangeCounts, AgreesWithAScanOfEveryRange) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 20; ++trial) {
    RangeCounts rc;
    std::vector<Range> live;
    for (int i = 0; i < 300; ++i) {
      Range r{rng() % 100000, 1 + rng() % (trial % 2 ? 50000 : 500)};
      rc.add(r);
      live.push_back(r);
      if (rng() % 4 == 0) {  // drop one (the longest too, at times: the window narrows)
        size_t k = rng() % live.size();
        ASSERT_GE(rc.remove(live[k]), 0);
        live.erase(live.begin() + static_cast<long>(k));
      }
    }
    for (int q = 0; q < 2000; ++q) {
      uintptr_t lo = rng() % 160000;
      size_t size = rng() % (q % 2 ? 60000 : 800);
      Range want{}, got{};
      bool expect = scan_all(live, lo, size, &want);
      ASSERT_EQ(rc.covering(lo, size, &got), expect) << "lo " << lo << " size " << size;
      if (expect) {
        ASSERT_EQ(got, want) << "lo " << lo << " size " << size;
      }
    }
  }
}

}  // namespace
}  // namespace zcx
