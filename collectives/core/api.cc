// Public C API of the collectives (coll.h), communicators' lifetime: init, split, destroy,
// abort, queries and registrations. The operations are in api_ops.cc. No exception leaves
// this file (allocation failures become ZCX_ERR_NO_MEMORY).
#include "base/api_internal.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config_vars.h"
#include "core/api_call.h"
#include "core/api_handles.h"
#include "core/comm.h"

#include <zcx/coll.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

namespace zcx::coll {
namespace {

// Communicator handles are in the API's handle registry (handle_live) while they may be
// used. A call checks its handle and counts itself in under this lock, and zcx_comm_abort
// and _destroy take the handle out under it, so an abort from another thread never frees a
// communicator that a call is about to enter.
std::mutex g_comms_mu;

// Removes the handle from the live set; false when it was not there.
bool comm_retire(zcx_comm* c) {
  std::lock_guard<std::mutex> lock(g_comms_mu);
  if (c == nullptr || !handle_live(c)) return false;
  handle_remove(c);
  c->aborting.store(true);
  return true;
}

// zcx_comm_abort: waits (bounded) for the calls inside the communicator to return; the
// abort request makes each fail at its next poll.
Status wait_for_calls(zcx_comm* c) {
  Deadline dl = Deadline::after_ms(params::timeout_ms());
  while (c->calls.load() > 0) {
    if (dl.expired())
      return set_error(Status::kTimeout, kLogColl,
                       "zcx_comm_abort: %d call(s) on communicator '%s' did not return within "
                       "ZCX_TIMEOUT; it is left allocated",
                       c->calls.load(), c->comm->name().c_str());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return Status::kSuccess;
}

}  // namespace

CallScope::CallScope(zcx_comm* c) {
  std::lock_guard<std::mutex> lock(g_comms_mu);
  if (c == nullptr || !handle_live(c)) {  // membership first: c may be freed
    st_ = set_error(Status::kInvalidArg, kLogColl,
                    "not a live communicator (NULL, destroyed or aborted)");
  } else if (c->aborting.load()) {
    st_ = set_error(Status::kAborted, kLogColl, "the communicator is being aborted");
  } else {
    c_ = c;
    c_->calls.fetch_add(1);
  }
}

Status check_comm(zcx_comm* c) {
  ZCX_CHECK_ARG(c != nullptr && c->comm != nullptr, kLogColl, "NULL communicator");
  return Status::kSuccess;
}

zcx_comm* comm_publish(std::unique_ptr<zcx_comm> c) {
  handle_add(c.get());  // a new address: no call or retire can race on it
  return c.release();
}

}  // namespace zcx::coll

using namespace zcx;
using namespace zcx::coll;

extern "C" {

ZCX_API void zcx_comm_config_init(zcx_comm_config_t* config) {
  if (!config) return;
  *config = zcx_comm_config_t{};
  config->size = sizeof(*config);
  config->blocking = 1;
}

ZCX_API zcx_status_t zcx_comm_init_rank(zcx_comm_t* comm, int nranks, const zcx_unique_id_t* id,
                                        int rank, const zcx_comm_config_t* config) {
  return guarded([&] {
    ZCX_CHECK_ARG(comm && id && nranks > 0 && rank >= 0 && rank < nranks, kLogColl,
                  "zcx_comm_init_rank: bad arguments (rank %d of %d)", rank, nranks);
    UniqueId uid;
    ZCX_TRY(unique_id_decode(*id, &uid));
    std::unique_ptr<Bootstrap> bs;
    ZCX_TRY(Bootstrap::init(uid, rank, nranks, &bs));
    std::unique_ptr<Context> ctx;
    ZCX_TRY(Context::create(std::move(bs), &ctx));
    Context* raw = ctx.get();
    return init_on_context(std::move(ctx), raw, config, comm);
  });
}

ZCX_API zcx_status_t zcx_comm_init_env(zcx_comm_t* comm, const zcx_comm_config_t* config) {
  return guarded([&] {
    ZCX_CHECK_ARG(comm, kLogColl, "zcx_comm_init_env: NULL comm");
    std::unique_ptr<Bootstrap> bs;
    ZCX_TRY(Bootstrap::init_from_env(&bs));
    std::unique_ptr<Context> ctx;
    ZCX_TRY(Context::create(std::move(bs), &ctx));
    Context* raw = ctx.get();
    return init_on_context(std::move(ctx), raw, config, comm);
  });
}

ZCX_API zcx_status_t zcx_comm_split(zcx_comm_t comm, int color, int key, zcx_comm_t* newcomm,
                                    const zcx_comm_config_t* config) {
  return guarded([&] {
    ZCX_TRY(check_comm(comm));
    ZCX_CHECK_ARG(newcomm, kLogColl, "zcx_comm_split: NULL newcomm");
    ZCX_CHECK_ARG(color >= 0 || color == ZCX_SPLIT_NOCOLOR, kLogColl, "split color %d", color);
    (void)config;
    CallScope scope(comm);
    ZCX_TRY(scope.status());
    std::unique_ptr<Comm> sub;
    ZCX_TRY(host_turn(comm));
    ZCX_TRY(comm->comm->split(color, key, &sub));
    *newcomm = nullptr;
    if (!sub) return Status::kSuccess;
    auto handle = std::make_unique<zcx_comm>();
    handle->comm = std::move(sub);
    *newcomm = comm_publish(std::move(handle));
    return Status::kSuccess;
  });
}

ZCX_API zcx_status_t zcx_comm_destroy(zcx_comm_t comm) {
  if (!comm_retire(comm))
    return to_c(set_error(Status::kInvalidArg, kLogColl, "zcx_comm_destroy: not a live "
                          "communicator (NULL, destroyed or aborted)"));
  // Operations still queued own buffers the transport may write: finish them first. Failed
  // ones stay owned by the communicator until its context closes.
  Status gpu = comm->comm ? host_turn(comm) : Status::kSuccess;
  if (comm->gpu) comm->gpu->stop();
  zcx_status_t st = comm->comm ? to_c(comm->comm->drain()) : ZCX_SUCCESS;
  delete comm;
  return st != ZCX_SUCCESS ? st : to_c(gpu);
}

// May be called from another thread while a call is inside the communicator: new calls are
// refused at once, the calls inside fail at their next poll, and the communicator is freed
// once they have returned (bounded by ZCX_TIMEOUT).
ZCX_API zcx_status_t zcx_comm_abort(zcx_comm_t comm) {
  if (!comm_retire(comm))
    return to_c(set_error(Status::kInvalidArg, kLogColl, "zcx_comm_abort: not a live "
                          "communicator (NULL, destroyed or aborted)"));
  comm->comm->request_abort();
  if (Status s = wait_for_calls(comm); s != Status::kSuccess) return to_c(s);
  if (comm->gpu) comm->gpu->stop();  // ends a stream-ordered call in flight
  comm->comm->abort();
  delete comm;
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_rank(zcx_comm_t comm, int* rank) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess || !rank) return ZCX_ERR_INVALID_ARG;
  *rank = comm->comm->rank();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_nranks(zcx_comm_t comm, int* nranks) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess || !nranks) return ZCX_ERR_INVALID_ARG;
  *nranks = comm->comm->nranks();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_get_async_error(zcx_comm_t comm, zcx_status_t* error) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess) return to_c(scope.status());
  if (!error) return ZCX_ERR_INVALID_ARG;
  *error = to_c(comm->gpu ? comm->gpu->async_error(*comm->comm) : comm->comm->async_error());
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_register(zcx_comm_t comm, void* buf, size_t size, void** handle) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess) return to_c(scope.status());
  if (handle == nullptr || buf == nullptr || size == 0)
    return to_c(set_error(Status::kInvalidArg, kLogColl,
                          "zcx_comm_register: NULL handle output, NULL buffer or zero size"));
  if (Status s = comm->comm->context().mem_register(buf, size); s != Status::kSuccess)
    return to_c(s);
  comm->regs.push_back(std::make_unique<zcx_memreg>(zcx_memreg{buf, size}));
  *handle = comm->regs.back().get();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_comm_deregister(zcx_comm_t comm, void* handle) {
  CallScope scope(comm);
  if (scope.status() != Status::kSuccess) return to_c(scope.status());
  auto it = std::find_if(comm->regs.begin(), comm->regs.end(),
                         [&](const auto& r) { return r.get() == handle; });
  if (it == comm->regs.end())
    return to_c(set_error(Status::kInvalidArg, kLogColl,
                          "zcx_comm_deregister: not a registration of this communicator"));
  Status s = comm->comm->context().mem_deregister((*it)->buf, (*it)->size);
  comm->regs.erase(it);
  return to_c(s);
}

}  // extern "C"
