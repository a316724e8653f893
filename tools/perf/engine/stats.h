// Summaries of repeated measurements: median, min, max.
#pragma once

#include <vector>

namespace zcx::perf {

struct Summary {
  double median = 0, min = 0, max = 0;
};

// The median of an even count is the mean of the two middle values. Empty input gives zeros.
Summary summarize(std::vector<double> samples);

}  // namespace zcx::perf
