// zcx-plan's model of one collective call: what the selector picks and, from every rank's
// schedule (the same builders a communicator plans with), the bytes and messages that move
// between each pair of ranks, by link class. Nothing is sent: buffers are address space
// only (PROT_NONE), never touched.
#pragma once

#include "select/select.h"

#include <zcx/coll.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zcx::plan {

struct PlanInput {
  coll::CollKind kind = coll::CollKind::kAllreduce;
  size_t bytes = 0;  // as zcx-perf coll and nccl-tests count a call's size
  zcx_dtype_t dtype = ZCX_FLOAT32;
  zcx_redop_t op = ZCX_SUM;
  int root = 0;
  std::vector<int> host_of;  // host index of every rank (its size is the rank count)
  bool lane = true;          // the shared lane where the communicator could use it
  int cpus = 0;              // CPUs per host for its ranks (0: one per rank)
};

// What one rank moves. Messages count every send, header-only ones included.
struct RankTraffic {
  size_t out[2] = {0, 0}, in[2] = {0, 0};  // bytes by coll::LinkClass
  size_t msgs_out = 0, msgs_in = 0;
  size_t reduced = 0, copied = 0;          // bytes reduced and copied locally
};

struct Plan {
  coll::Choice choice;  // the selector's, with its explanation
  coll::Algo built = coll::Algo::kRing;  // the algorithm whose schedules were built
  bool lane = false;    // the shared lane: no schedule, no messages
  size_t count = 0;     // the call's count argument
  std::vector<RankTraffic> ranks;
  // Where a sender's bytes or messages to a peer differ from what that peer receives from
  // it (a schedule error; never expected): one line per pair.
  std::vector<std::string> mismatches;
};

// "" on success, else what is wrong with the input (or the builder's error).
std::string make_plan(const PlanInput& in, Plan* out);

}  // namespace zcx::plan
