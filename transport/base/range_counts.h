// Counted address ranges: the ranges callers registered (mem_register) or hold for a while
// (hold_range), each with how many callers named it. Every request over a registering
// provider asks which range holds its bytes, so the query must not walk every range: a range
// that holds [lo, lo + size) starts no further than the longest range's length below
// lo + size, and only ranges starting in that window are looked at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

namespace zcx {

class RangeCounts {
 public:
  using Range = std::pair<uintptr_t, size_t>;  // start address, bytes

  // One more use of r.
  void add(Range r);
  // One use of r less; the uses left, or -1 when r has none.
  int remove(Range r);
  bool contains(Range r) const { return counts_.count(r) != 0; }
  bool empty() const { return counts_.empty(); }
  // The first range (by start, then length) holding [lo, lo + size); false when none does.
  bool covering(uintptr_t lo, size_t size, Range* out) const;
  // The longest range's length: how far below a transfer's end the query looks.
  size_t longest() const { return longest_; }

 private:
  std::map<Range, int> counts_;
  size_t longest_ = 0;  // recomputed when the longest range goes (removals are rare)
};

}  // namespace zcx
