#include "common/dl/ucx_shim.h"

#include "common/dl/dl.h"

#include <mutex>

namespace zcx {
namespace {

// Resolves every entry; stops at the first missing one (lib.error() names it).
bool resolve_all(DlLibrary& lib, UcxApi& api) {
  return lib.symbol("ucp_get_version", api.get_version) &&
         lib.symbol("ucp_config_read", api.config_read) &&
         lib.symbol("ucp_config_release", api.config_release) &&
         lib.symbol("ucp_init_version", api.init_version) &&
         lib.symbol("ucp_cleanup", api.cleanup) &&
         lib.symbol("ucp_context_query", api.context_query) &&
         lib.symbol("ucp_context_print_info", api.context_print_info) &&
         lib.symbol("ucp_worker_create", api.worker_create) &&
         lib.symbol("ucp_worker_destroy", api.worker_destroy) &&
         lib.symbol("ucp_worker_progress", api.worker_progress) &&
         lib.symbol("ucp_worker_get_address", api.worker_get_address) &&
         lib.symbol("ucp_worker_release_address", api.worker_release_address) &&
         lib.symbol("ucp_ep_create", api.ep_create) &&
         lib.symbol("ucp_ep_close_nbx", api.ep_close_nbx) &&
         lib.symbol("ucp_listener_create", api.listener_create) &&
         lib.symbol("ucp_listener_destroy", api.listener_destroy) &&
         lib.symbol("ucp_listener_query", api.listener_query) &&
         lib.symbol("ucp_conn_request_query", api.conn_request_query) &&
         lib.symbol("ucp_request_check_status", api.request_check_status) &&
         lib.symbol("ucp_request_cancel", api.request_cancel) &&
         lib.symbol("ucp_request_free", api.request_free) &&
         lib.symbol("ucp_tag_send_nbx", api.tag_send_nbx) &&
         lib.symbol("ucp_tag_recv_nbx", api.tag_recv_nbx) &&
         lib.symbol("ucp_tag_recv_request_test", api.tag_recv_request_test) &&
         lib.symbol("ucp_tag_probe_nb", api.tag_probe_nb) &&
         lib.symbol("ucp_tag_msg_recv_nbx", api.tag_msg_recv_nbx) &&
         lib.symbol("ucp_mem_map", api.mem_map) &&
         lib.symbol("ucp_mem_unmap", api.mem_unmap) &&
         // ucs_status_string lives in libucs, a dependency of libucp: dlsym on the libucp
         // handle searches its dependencies too.
         lib.symbol("ucs_status_string", api.status_string);
}

struct Loaded {
  DlLibrary lib;
  UcxApi api{};
};

}  // namespace

const UcxApi* ucx_api_load(const std::string& library, std::string* why) {
  static std::mutex mu;
  // Never destroyed: unloading UCX while its atexit handlers or modules run is unsafe.
  static Loaded* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded != nullptr) return &loaded->api;
  auto* attempt = new Loaded;
  if (!attempt->lib.open({library.c_str()}) || !resolve_all(attempt->lib, attempt->api)) {
    if (why != nullptr) *why = attempt->lib.error();
    delete attempt;
    return nullptr;
  }
  loaded = attempt;
  return &loaded->api;
}

}  // namespace zcx
