// Command line of zcx-perf coll: the nccl-tests flags (-b -e -f -i -n -w -c -o -d -r) plus
// --reps, --json, --provider, --algo, --device and --overlap.
#pragma once

#include "engine/sweep.h"

#include <zcx/coll.h>

#include <cstddef>
#include <string>
#include <vector>

namespace zcx::perf {

struct CollOptions {
  std::string op;                  // allreduce, broadcast, ...
  SweepOptions sweep;              // -b -e -f -n -w --reps --json
  size_t step_bytes = 0;           // -i: linear step, used when the factor is 1
  bool check = true;               // -c
  zcx_dtype_t dtype = ZCX_FLOAT32;  // -d
  zcx_redop_t redop = ZCX_SUM;     // -o
  int root = 0;                    // -r
  std::string provider;            // --provider: ZCX_PROVIDERS for this process ("" = as is)
  std::string algo;                // --algo: ZCX_ALGO for this process ("" = as is)
  bool gpu = false;                // --device gpu: buffers on CUDA device 0, calls on a stream
  int overlap_poll_us = -1;        // --overlap POLL_US: also measure overlap (-1: not)
};

// args: everything after "coll" (the op first). Returns "" or a message naming the problem.
std::string parse_coll_options(std::vector<std::string> args, CollOptions* out);

// The sizes to measure: geometric with -f, or linear with -i when the factor is 1.
std::vector<size_t> coll_sizes(const CollOptions& o);

}  // namespace zcx::perf
