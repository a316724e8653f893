// The structs behind the public collective handles (coll.h), shared by api*.cc.
#pragma once

#include "core/comm.h"
#include "core/gpu_queue.h"

#include <zcx/coll.h>

#include <memory>

struct zcx_comm {
  std::unique_ptr<zcx::coll::Comm> comm;
  // Stream-ordered calls, made at the first one. Declared after comm: destroyed first.
  std::unique_ptr<zcx::coll::GpuQueue> gpu;
};

struct zcx_coll_request {
  zcx_comm* owner;
  std::shared_ptr<zcx::coll::Op> op;
};
