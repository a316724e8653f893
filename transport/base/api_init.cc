// Public C API: bootstrap, context lifetime, rank queries, barrier.
#include "base/api_internal.h"

#include "common/check.h"
#include "common/config.h"

#include <mutex>
#include <new>
#include <unordered_set>

namespace zcx {
namespace {

std::mutex g_handles_mu;
std::unordered_set<const void*>& handles() {
  static std::unordered_set<const void*> h;
  return h;
}
const ContextOptions* g_test_options = nullptr;

zcx_status_t make_context(std::unique_ptr<Bootstrap> bs, zcx_context_t* out) {
  std::unique_ptr<Context> ctx;
  Status s = g_test_options ? Context::create(std::move(bs), *g_test_options, &ctx)
                            : Context::create(std::move(bs), &ctx);
  if (failed(s)) return to_c(s);
  auto* c = new (std::nothrow) zcx_context{std::move(ctx), {}, {}, {}, {}};
  if (c == nullptr) return to_c(set_error(Status::kNoMemory, kLogInit, "out of memory"));
  handle_add(c);
  *out = c;
  return ZCX_SUCCESS;
}

Status check_context(zcx_context_t ctx) {
  ZCX_CHECK_ARG(ctx != nullptr && handle_live(ctx), kLogInit,
                "not a live zcx context (NULL, finalized, or not from zcx_init_*)");
  return Status::kSuccess;
}

}  // namespace

void handle_add(const void* h) {
  std::lock_guard<std::mutex> lock(g_handles_mu);
  handles().insert(h);
}
void handle_remove(const void* h) {
  std::lock_guard<std::mutex> lock(g_handles_mu);
  handles().erase(h);
}
bool handle_live(const void* h) {
  std::lock_guard<std::mutex> lock(g_handles_mu);
  return handles().count(h) != 0;
}
void api_set_context_options(const ContextOptions* options) { g_test_options = options; }

}  // namespace zcx

using namespace zcx;

extern "C" {

ZCX_API zcx_status_t zcx_get_unique_id(zcx_unique_id_t* id) {
  if (id == nullptr) return to_c(set_error(Status::kInvalidArg, kLogInit, "zcx_get_unique_id: id is NULL"));
  UniqueId uid;
  Status s = unique_id_create(&uid);
  if (ok(s)) s = unique_id_encode(uid, id);
  return to_c(s);
}

ZCX_API zcx_status_t zcx_init_rank(zcx_context_t* ctx, int nranks, const zcx_unique_id_t* id,
                                   int rank) {
  if (ctx == nullptr || id == nullptr)
    return to_c(set_error(Status::kInvalidArg, kLogInit, "zcx_init_rank: NULL %s", ctx ? "id" : "ctx"));
  *ctx = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return to_c(set_error(Status::kInvalidArg, kLogInit, "zcx_init_rank: rank %d of %d is out of range",
                          rank, nranks));
  UniqueId uid;
  Status s = unique_id_decode(*id, &uid);
  if (failed(s)) return to_c(s);
  config::warn_unknown_env();
  std::unique_ptr<Bootstrap> bs;
  s = Bootstrap::init(uid, rank, nranks, &bs);
  return failed(s) ? to_c(s) : make_context(std::move(bs), ctx);
}

ZCX_API zcx_status_t zcx_init_from_env(zcx_context_t* ctx) {
  if (ctx == nullptr) return to_c(set_error(Status::kInvalidArg, kLogInit, "zcx_init_from_env: ctx is NULL"));
  *ctx = nullptr;
  config::warn_unknown_env();
  std::unique_ptr<Bootstrap> bs;
  Status s = Bootstrap::init_from_env(&bs);
  return failed(s) ? to_c(s) : make_context(std::move(bs), ctx);
}

// Local: it does not wait for the peers (call zcx_barrier first when they may still send).
ZCX_API zcx_status_t zcx_finalize(zcx_context_t ctx) {
  if (Status s = check_context(ctx); failed(s)) return to_c(s);
  handle_remove(ctx);
  for (auto& [peer, ep] : ctx->endpoints) handle_remove(ep.get());
  for (zcx_request* r : ctx->requests) {
    handle_remove(r);
    delete r;
  }
  for (zcx_memreg* m : ctx->regs) {
    handle_remove(m);
    delete m;
  }
  delete ctx;  // requests still open are dropped (their handles become invalid)
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_abort(zcx_context_t ctx) {
  if (Status s = check_context(ctx); failed(s)) return to_c(s);
  ctx->ctx->abort();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_rank(zcx_context_t ctx, int* rank) {
  if (Status s = check_context(ctx); failed(s)) return to_c(s);
  if (rank == nullptr) return to_c(set_error(Status::kInvalidArg, kLogInit, "zcx_rank: rank is NULL"));
  *rank = ctx->ctx->rank();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_nranks(zcx_context_t ctx, int* nranks) {
  if (Status s = check_context(ctx); failed(s)) return to_c(s);
  if (nranks == nullptr) return to_c(set_error(Status::kInvalidArg, kLogInit, "zcx_nranks: nranks is NULL"));
  *nranks = ctx->ctx->nranks();
  return ZCX_SUCCESS;
}

ZCX_API zcx_status_t zcx_barrier(zcx_context_t ctx) {
  if (Status s = check_context(ctx); failed(s)) return to_c(s);
  return to_c(ctx->ctx->bootstrap().barrier());
}

}  // extern "C"
