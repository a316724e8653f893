// Communicators of all ranks of a context: the one a communicator owns (zcx_comm_init_rank,
// _env) and the caller's (zcx_comm_init_context, over zcx_init_rank / _from_env).
#include "base/api_internal.h"
#include "common/check.h"
#include "core/api_call.h"
#include "core/api_handles.h"
#include "core/comm.h"

#include <zcx/coll.h>

#include <string>
#include <vector>

namespace zcx::coll {

Status init_on_context(std::unique_ptr<Context> owned, Context* ctx,
                       const zcx_comm_config_t* config, zcx_comm_t* out) {
  std::vector<int> world(ctx->nranks());
  for (int r = 0; r < ctx->nranks(); ++r) world[r] = r;
  std::string name = config && config->size >= sizeof(zcx_comm_config_t) && config->name
                         ? config->name : "world";
  auto handle = std::make_unique<zcx_comm>();
  ZCX_TRY(Comm::create(ctx, std::move(owned), std::move(world), ctx->rank(),
                       ctx->bootstrap().secret() ^ 0x636f6c6cull, name, &handle->comm));
  *out = comm_publish(std::move(handle));
  return Status::kSuccess;
}

}  // namespace zcx::coll

extern "C" ZCX_API zcx_status_t zcx_comm_init_context(zcx_comm_t* comm, zcx_context_t ctx,
                                                      const zcx_comm_config_t* config) {
  using namespace zcx;
  return coll::guarded([&] {
    ZCX_CHECK_ARG(comm && ctx && handle_live(ctx) && ctx->ctx, kLogColl,
                  "zcx_comm_init_context: NULL output or not a live context");
    return coll::init_on_context(nullptr, ctx->ctx.get(), config, comm);
  });
}
