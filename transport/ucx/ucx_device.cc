// Contexts and the one device of the ucx provider: a UCP context and worker per zcx ctx.
#include "ucx/ucx.h"
#include "ucx/ucx_config.h"

#include <cstring>

namespace zcx::ucx {
namespace {

Status create_context(Ctx* ctx) {
  const UcxApi& api = *ctx->api;
  ucp_config_t* config = nullptr;
  ucs_status_t s = api.config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) {
    ctx->unavailable = std::string("ucp_config_read failed: ") + api.status_string(s);
    return Status::kNoDevice;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  s = api.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &ctx->context);
  api.config_release(config);
  if (s != UCS_OK) {
    ctx->context = nullptr;
    ctx->unavailable = std::string("ucp_init failed: ") + api.status_string(s);
    return Status::kNoDevice;
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (api.context_query(ctx->context, &attr) == UCS_OK) ctx->mem_types = attr.memory_types;
  return Status::kSuccess;
}

Status create_worker(Ctx* ctx) {
  ucp_worker_params_t params{};
  // SINGLE: every UCP call on this ctx holds ctx->mu, so UCX need not lock again.
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t s = ctx->api->worker_create(ctx->context, &params, &ctx->worker);
  if (s != UCS_OK) {
    ctx->worker = nullptr;
    ctx->unavailable = std::string("ucp_worker_create failed: ") + ctx->api->status_string(s);
    return Status::kNoDevice;
  }
  ucp_address_t* address = nullptr;
  size_t len = 0;
  s = ctx->api->worker_get_address(ctx->worker, &address, &len);
  if (s != UCS_OK || len > kMaxWorkerAddress) {
    ctx->api->worker_destroy(ctx->worker);
    ctx->worker = nullptr;
    ctx->unavailable = std::string("ucp_worker_get_address failed: ") +
                       (s != UCS_OK ? ctx->api->status_string(s) : "address too long");
    return Status::kNoDevice;
  }
  ctx->worker_address.assign(reinterpret_cast<const char*>(address), len);
  ctx->api->worker_release_address(ctx->worker, address);
  ZCX_INFO(kLog, "ucx: worker address %zu bytes", len);
  return Status::kSuccess;
}

}  // namespace

Status fill_self(const zcx_provider_init_t* init, Self* self) {
  if (init == nullptr || init->size < sizeof(zcx_provider_init_t))
    return set_error(Status::kInvalidArg, kLog, "ucx init: missing or short zcx_provider_init_t");
  self->rank = init->rank;
  self->nranks = init->nranks;
  self->secret = init->secret;
  self->host.assign(init->host, strnlen(init->host, sizeof(init->host)));
  return Status::kSuccess;
}

Status ctx_create(const zcx_provider_init_t* init, Ctx** out) {
  auto ctx = std::make_unique<Ctx>();
  ZCX_TRY(fill_self(init, &ctx->self));
  ctx->spin = static_cast<int>(params::progress_spin.get());
  std::string why;
  ctx->api = ucx_api_load(params::library.get(), &why);
  if (ctx->api == nullptr) {
    ctx->unavailable = "UCX library not loaded (" + why + ")";
  } else if (ok(create_context(ctx.get()))) {
    (void)create_worker(ctx.get());
  }
  if (!ctx->unavailable.empty())
    ZCX_INFO(kLog, "ucx provider: no devices: %s", ctx->unavailable.c_str());
  *out = ctx.release();
  return Status::kSuccess;
}

void ctx_destroy(Ctx* ctx) {
  if (ctx == nullptr) return;
  drop_pending_connects(ctx);
  if (ctx->worker != nullptr) sockaddr_shutdown(ctx);
  // Registrations the caller left behind: UCX asserts if its cache still holds them.
  while (!ctx->mrs.empty()) (void)dereg_mr(*ctx->mrs.begin());
  if (ctx->worker_unsafe) {
    ZCX_INFO(kLog, "ucx: leaving the UCP worker and context to process exit (a dead peer "
             "left requests inside UCX, and destroying them would abort)");
  } else {
    if (ctx->worker != nullptr) ctx->api->worker_destroy(ctx->worker);
    if (ctx->context != nullptr) ctx->api->cleanup(ctx->context);
  }
  delete ctx;
}

Status get_properties(Ctx* ctx, int dev, zcx_device_props_t* props) {
  if (ctx->worker == nullptr || dev != 0 || props == nullptr)
    return set_error(Status::kInvalidArg, kLog, "ucx: no device %d (%s)", dev,
                     ctx->unavailable.empty() ? "one device: 0" : ctx->unavailable.c_str());
  *props = zcx_device_props_t{};
  unsigned major = 0, minor = 0, release = 0;
  ctx->api->get_version(&major, &minor, &release);
  snprintf(props->name, sizeof(props->name), "ucx-%u.%u.%u", major, minor, release);
  props->speed_mbps = 10000;  // UCP does not report a link speed; NCCL's UCX plugin says 10G too
  props->latency_us = 0;
  props->port = 1;
  props->mem_kinds = ZCX_MEM_HOST;
  if (ctx->mem_types & (1ull << UCS_MEMORY_TYPE_CUDA)) props->mem_kinds |= ZCX_MEM_CUDA;
  props->max_requests = 1024;
  props->max_recvs = kMaxRecvs;
  props->max_comms = static_cast<int>(kConnMask);
  props->inline_bytes = 0;
  props->max_message = size_t{1} << 40;
  props->reg_is_global = 1;
  props->needs_flush = 0;
  return Status::kSuccess;
}

}  // namespace zcx::ucx
