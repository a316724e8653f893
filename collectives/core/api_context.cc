// zcx_comm_init_context: a communicator over a context made with zcx_init_rank / _from_env.
#include "base/api_internal.h"
#include "core/api_handles.h"
#include "core/comm.h"

#include <zcx/coll.h>

extern "C" ZCX_API zcx_status_t zcx_comm_init_context(zcx_comm_t* comm, zcx_context_t ctx,
                                                      const zcx_comm_config_t* config) {
  using namespace zcx;
  if (!comm || !ctx || !handle_live(ctx) || !ctx->ctx) return ZCX_ERR_INVALID_ARG;
  try {
    Context* c = ctx->ctx.get();
    std::vector<int> world(c->nranks());
    for (int r = 0; r < c->nranks(); ++r) world[r] = r;
    const char* name = config && config->size >= sizeof(zcx_comm_config_t) && config->name
                           ? config->name : "world";
    auto handle = std::make_unique<zcx_comm>();
    Status st = coll::Comm::create(c, nullptr, std::move(world), c->rank(),
                                   c->bootstrap().secret() ^ 0x636f6c6cull, name, &handle->comm);
    if (st != Status::kSuccess) return to_c(st);
    *comm = coll::comm_publish(std::move(handle));
    return ZCX_SUCCESS;
  } catch (...) {
    return ZCX_ERR_NO_MEMORY;
  }
}
