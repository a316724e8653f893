// The structs behind the public collective handles (coll.h), shared by api*.cc.
#pragma once

#include "base/api_internal.h"
#include "core/comm.h"
#include "core/gpu_runner.h"

#include <zcx/coll.h>

#include <atomic>
#include <memory>
#include <vector>

struct zcx_comm {
  // Stream-ordered calls' device resources, made at the first one. Declared before comm:
  // destroyed after it (its schedules' scratch pools are shared, its stream is not).
  std::unique_ptr<zcx::coll::GpuRunner> gpu;
  std::unique_ptr<zcx::coll::Comm> comm;
  std::atomic<int> calls{0};          // API calls inside it now (CallScope, api.cc)
  std::atomic<bool> aborting{false};  // zcx_comm_abort began: new calls are refused
  // zcx_comm_register's ranges (registered at comm's context), each the handle given out.
  std::vector<std::unique_ptr<zcx_memreg>> regs;
  // The runner's progress thread drives comm: it stops first. The registrations go before
  // comm (and a context it owns), as the context may be the caller's.
  ~zcx_comm() {
    if (gpu) gpu->stop();
    for (const auto& r : regs)
      if (comm) (void)comm->context().mem_deregister(r->buf, r->size);
  }
};

namespace zcx::coll {
// Makes a new communicator handle known to the API (calls on unknown handles are refused
// with an error instead of touching freed memory) and releases it to the caller.
zcx_comm* comm_publish(std::unique_ptr<zcx_comm> c);
}  // namespace zcx::coll

struct zcx_coll_request {
  zcx_comm* owner;
  std::shared_ptr<zcx::coll::Op> op;
};
