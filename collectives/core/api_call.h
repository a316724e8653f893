// What every entry point of the collectives' C API (api*.cc) shares: the scope of one call
// on a communicator, the exception guard, and the host's turn on a communicator that also
// runs stream-ordered calls.
#pragma once

#include "common/log.h"
#include "common/status.h"
#include "core/api_handles.h"

#include <zcx/coll.h>

#include <memory>
#include <new>

namespace zcx {
class Context;
}

namespace zcx::coll {

// One API call on a communicator. Refused, with the reason, when the handle is unknown
// (NULL, destroyed, aborted) or an abort has begun; else counted in zcx_comm::calls until
// it ends, so that an abort from another thread never frees a communicator a call is in.
class CallScope {
 public:
  explicit CallScope(zcx_comm* c);
  ~CallScope() {
    if (c_) c_->calls.fetch_sub(1);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  Status status() const { return st_; }

 private:
  zcx_comm* c_ = nullptr;
  Status st_ = Status::kSuccess;
};

// Runs f, turning an escaping exception into a status: none leaves the C API.
template <class F>
zcx_status_t guarded(F&& f) {
  try {
    return to_c(f());
  } catch (const std::bad_alloc&) {
    return to_c(set_error(Status::kNoMemory, kLogColl, "out of memory in a collective call"));
  } catch (...) {
    return to_c(set_error(Status::kInternal, kLogColl,
                          "unexpected exception in a collective call"));
  }
}

[[nodiscard]] Status check_comm(zcx_comm* c);

// Before a host-side use of the communicator: no asynchronous stream-ordered call in flight
// (its progress thread drives the communicator meanwhile). Its failure, if any, is returned.
[[nodiscard]] inline Status host_turn(zcx_comm* c) {
  return c->gpu ? c->gpu->quiesce() : Status::kSuccess;
}

// A communicator of all ranks of ctx, published as *out. owned is ctx when the
// communicator owns its context (zcx_comm_init_rank/_env), null when the caller does.
[[nodiscard]] Status init_on_context(std::unique_ptr<Context> owned, Context* ctx,
                                     const zcx_comm_config_t* config, zcx_comm_t* out);

}  // namespace zcx::coll
