// Wall-clock timing for benchmarks (CLOCK_MONOTONIC).
#pragma once

#include "common/clock.h"

#include <cstdint>

namespace zcx::perf {

class Stopwatch {
 public:
  Stopwatch() : start_ns_(now_ns()) {}
  void restart() { start_ns_ = now_ns(); }
  double elapsed_s() const { return static_cast<double>(now_ns() - start_ns_) / 1e9; }
  double elapsed_us() const { return static_cast<double>(now_ns() - start_ns_) / 1e3; }

 private:
  int64_t start_ns_;
};

}  // namespace zcx::perf
