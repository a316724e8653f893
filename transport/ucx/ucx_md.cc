// Memory registration of the ucx provider: ucp_mem_map, so UCX's own registration cache and
// its GPU memory support (where UCX is built with CUDA) do the work.
#include "ucx/ucx.h"

namespace zcx::ucx {

Status reg_mr(Ctx* ctx, void* data, size_t size, int kind, Mr** out) {
  *out = nullptr;
  if (kind != ZCX_MEM_HOST && kind != ZCX_MEM_CUDA)
    return set_error(Status::kInvalidArg, kLog, "ucx reg_mr: memory kind %d not supported", kind);
  if (kind == ZCX_MEM_CUDA && !(ctx->mem_types & (1ull << UCS_MEMORY_TYPE_CUDA)))
    return set_error(Status::kUnsupported, kLog, "ucx reg_mr: this UCX was built without CUDA "
                     "support (ucx_info -d lists no cuda transport)");
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = data;
  params.length = size;
  params.memory_type = kind == ZCX_MEM_CUDA ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  auto mr = std::make_unique<Mr>();
  mr->ctx = ctx;
  std::lock_guard<std::recursive_mutex> lock(ctx->mu);
  ucs_status_t s = ctx->api->mem_map(ctx->context, &params, &mr->memh);
  if (s != UCS_OK)
    return set_error(Status::kSystem, kLog, "ucx: ucp_mem_map of %zu bytes at %p failed: %s",
                     size, data, ucs_text(ctx, s));
  ctx->mrs.insert(mr.get());
  *out = mr.release();
  return Status::kSuccess;
}

Status dereg_mr(Mr* mr) {
  if (mr == nullptr) return Status::kSuccess;
  Ctx* ctx = mr->ctx;
  std::lock_guard<std::recursive_mutex> lock(ctx->mu);
  ucs_status_t s = ctx->api->mem_unmap(ctx->context, mr->memh);
  ctx->mrs.erase(mr);
  delete mr;
  if (s != UCS_OK)
    return set_error(Status::kSystem, kLog, "ucx: ucp_mem_unmap failed: %s", ucs_text(ctx, s));
  return Status::kSuccess;
}

}  // namespace zcx::ucx
