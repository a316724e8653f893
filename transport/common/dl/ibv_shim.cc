#include "common/dl/ibv_shim.h"

#include "common/dl/dl.h"
#include "common/log.h"

#include <cstring>
#include <mutex>

namespace zcx {
namespace {

struct Loaded {
  std::mutex mu;
  DlLibrary lib;
  IbvApi api{};
  const IbvApi* ready = nullptr;
};

Loaded& loaded() {
  static Loaded* l = new Loaded();  // never destroyed: contexts may outlive static teardown
  return *l;
}

bool resolve(DlLibrary& lib, IbvApi* a, std::string* why) {
  bool ok = lib.need("ibv_get_device_list", a->get_device_list, why) &&
            lib.need("ibv_free_device_list", a->free_device_list, why) &&
            lib.need("ibv_get_device_name", a->get_device_name, why) &&
            lib.need("ibv_open_device", a->open_device, why) &&
            lib.need("ibv_close_device", a->close_device, why) &&
            lib.need("ibv_query_device", a->query_device, why) &&
            lib.need("ibv_query_port", a->query_port_compat, why) &&
            lib.need("ibv_query_gid", a->query_gid, why) &&
            lib.need("ibv_alloc_pd", a->alloc_pd, why) &&
            lib.need("ibv_dealloc_pd", a->dealloc_pd, why) &&
            lib.need("ibv_reg_mr", a->reg_mr, why) &&
            lib.need("ibv_dereg_mr", a->dereg_mr, why) &&
            lib.need("ibv_create_cq", a->create_cq, why) &&
            lib.need("ibv_destroy_cq", a->destroy_cq, why) &&
            lib.need("ibv_create_qp", a->create_qp, why) &&
            lib.need("ibv_modify_qp", a->modify_qp, why) &&
            lib.need("ibv_destroy_qp", a->destroy_qp, why) &&
            lib.need("ibv_wc_status_str", a->wc_status_str, why);
  if (!ok) return false;
  // Optional: older rdma-core lacks them; callers check for null.
  if (!lib.symbol("ibv_reg_mr_iova2", a->reg_mr_iova2)) a->reg_mr_iova2 = nullptr;
  if (!lib.symbol("ibv_reg_dmabuf_mr", a->reg_dmabuf_mr)) a->reg_dmabuf_mr = nullptr;
  return true;
}

}  // namespace

const IbvApi* ibv_shim_load(const std::string& library, std::string* why) {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.ready != nullptr) return l.ready;
  if (!l.lib.open({library.c_str()})) {
    if (why) *why = l.lib.error();
    return nullptr;
  }
  IbvApi api{};
  if (!resolve(l.lib, &api, why)) {
    l.lib.reset();
    return nullptr;
  }
  l.api = api;
  l.ready = &l.api;
  ZCX_INFO(kLogIb, "loaded %s for the ib provider", library.c_str());
  return l.ready;
}

const IbvApi* ibv_shim() {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mu);
  return l.ready;
}

int ibv_shim_query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx != nullptr) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  memset(attr, 0, sizeof(*attr));
  const IbvApi* api = ibv_shim();
  if (api == nullptr) return ENOSYS;
  return api->query_port_compat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

ibv_mr* ibv_shim_reg_mr(ibv_pd* pd, void* addr, size_t len, unsigned int access) {
  const IbvApi* api = ibv_shim();
  if (api == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  if (api->reg_mr_iova2 != nullptr)
    return api->reg_mr_iova2(pd, addr, len, reinterpret_cast<uintptr_t>(addr), access);
  return api->reg_mr(pd, addr, len, static_cast<int>(access));
}

const char* ibv_shim_wc_status_str(int status) {
  const IbvApi* api = ibv_shim();
  const char* s = api ? api->wc_status_str(static_cast<ibv_wc_status>(status)) : nullptr;
  return s ? s : "unknown work completion status";
}

}  // namespace zcx
