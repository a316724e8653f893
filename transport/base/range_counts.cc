#include "base/range_counts.h"

#include <algorithm>

namespace zcx {

void RangeCounts::add(Range r) {
  ++counts_[r];
  longest_ = std::max(longest_, r.second);
}

int RangeCounts::remove(Range r) {
  auto it = counts_.find(r);
  if (it == counts_.end()) return -1;
  const int left = --it->second;
  if (left > 0) return left;
  counts_.erase(it);
  if (r.second == longest_) {
    longest_ = 0;
    for (const auto& [range, uses] : counts_) longest_ = std::max(longest_, range.second);
  }
  return 0;
}

bool RangeCounts::covering(uintptr_t lo, size_t size, Range* out) const {
  if (size > longest_) return false;
  // A holder starts at or after lo + size - longest_ (it reaches lo + size), and at or
  // before lo; written so that nothing wraps.
  const size_t slack = longest_ - size;
  const uintptr_t first = lo > slack ? lo - slack : 0;
  for (auto it = counts_.lower_bound({first, 0}); it != counts_.end(); ++it) {
    const auto [start, bytes] = it->first;
    if (start > lo) break;
    if (lo - start <= bytes && size <= bytes - (lo - start)) {
      *out = it->first;
      return true;
    }
  }
  return false;
}

}  // namespace zcx
