// Timing and checking one size of zcx-perf coll, as nccl-tests' BenchTime does: warm-up,
// then --reps repetitions of n iterations (each rank's mean time per iteration, averaged
// over the ranks), then one checked call. With device buffers the n calls of a repetition
// are enqueued on the stream and the time runs until cudaStreamSynchronize returns.
#pragma once

#include "coll/check.h"
#include "engine/stats.h"

#include <cstdint>
#include <string>

namespace zcx::perf {

struct PlacementResult {
  Summary time_us, algbw_GBps, busbw_GBps;  // over the repetitions
  int64_t wrong = -1;                        // summed over ranks; -1 = not checked
};

// --overlap, measured as the OSU micro-benchmarks measure a nonblocking collective: pure =
// post then wait at once; total = post, compute for `compute_us` (the median pure time),
// polling the request every poll_us of it (0: never; the polls' own time is not counted as
// computation), then wait; per repetition overlap = 100 * (1 - (total - compute) / pure),
// within 0..100. Out of place.
struct OverlapResult {
  bool measured = false;
  int poll_us = 0;
  double compute_us = 0;
  Summary pure_us, total_us, overlap_pct;  // times averaged over the ranks
};

struct SizeResult {
  size_t size = 0, count = 0;  // the table's "size" (bytes) and "count" (elements) columns
  int iters = 0;
  PlacementResult out_of_place, in_place;
  OverlapResult overlap;
};

struct MeasureSettings {
  int iters = 20, warmup = 5, reps = 5;
  bool check = true;
  int overlap_poll_us = -1;  // -1: overlap not measured
};

// Measures one placement. On failure returns false with *error saying what failed.
bool measure_placement(const Placement& p, const MeasureSettings& s, uint64_t seed,
                       const CollBuffers& b, PlacementResult* out, std::string* error);
// Measures the overlap of one placement's request form (host buffers).
bool measure_overlap(const Placement& p, const MeasureSettings& s, const CollBuffers& b,
                     OverlapResult* out, std::string* error);

}  // namespace zcx::perf
