// The structs behind the public collective handles (coll.h), shared by api*.cc.
#pragma once

#include "core/comm.h"
#include "core/gpu_runner.h"

#include <zcx/coll.h>

#include <memory>

struct zcx_comm {
  // Stream-ordered calls' device resources, made at the first one. Declared before comm:
  // destroyed after it (its schedules' scratch pools are shared, its stream is not).
  std::unique_ptr<zcx::coll::GpuRunner> gpu;
  std::unique_ptr<zcx::coll::Comm> comm;
  // The runner's progress thread drives comm: it stops first.
  ~zcx_comm() {
    if (gpu) gpu->stop();
  }
};

struct zcx_coll_request {
  zcx_comm* owner;
  std::shared_ptr<zcx::coll::Op> op;
};
