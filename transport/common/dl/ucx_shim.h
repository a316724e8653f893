// Run-time shim for UCX (libucp): libzcx never links libucp, so it loads and runs where UCX is
// absent. The UCX headers (libucx-dev) are used at build time only, for types and for the
// function signatures below; every ucp_/ucs_ call of the ucx provider goes through UcxApi.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace zcx {

// One entry per UCX function zcx uses. The types come from the headers, so a signature
// change in a newer libucx-dev is a compile error here, not a crash.
struct UcxApi {
  decltype(&ucp_get_version) get_version;
  decltype(&ucp_config_read) config_read;
  decltype(&ucp_config_release) config_release;
  decltype(&ucp_init_version) init_version;
  decltype(&ucp_cleanup) cleanup;
  decltype(&ucp_context_query) context_query;
  decltype(&ucp_context_print_info) context_print_info;
  decltype(&ucp_worker_create) worker_create;
  decltype(&ucp_worker_destroy) worker_destroy;
  decltype(&ucp_worker_progress) worker_progress;
  decltype(&ucp_worker_get_address) worker_get_address;
  decltype(&ucp_worker_release_address) worker_release_address;
  decltype(&ucp_ep_create) ep_create;
  decltype(&ucp_ep_close_nbx) ep_close_nbx;
  decltype(&ucp_listener_create) listener_create;
  decltype(&ucp_listener_destroy) listener_destroy;
  decltype(&ucp_listener_query) listener_query;
  decltype(&ucp_conn_request_query) conn_request_query;
  decltype(&ucp_request_check_status) request_check_status;
  decltype(&ucp_request_cancel) request_cancel;
  decltype(&ucp_request_free) request_free;
  decltype(&ucp_tag_send_nbx) tag_send_nbx;
  decltype(&ucp_tag_recv_nbx) tag_recv_nbx;
  decltype(&ucp_tag_recv_request_test) tag_recv_request_test;
  decltype(&ucp_tag_probe_nb) tag_probe_nb;
  decltype(&ucp_tag_msg_recv_nbx) tag_msg_recv_nbx;
  decltype(&ucp_mem_map) mem_map;
  decltype(&ucp_mem_unmap) mem_unmap;
  decltype(&ucs_status_string) status_string;
};

// Loads `library` (e.g. "libucp.so.0") with RTLD_NOW|RTLD_LOCAL once per process and resolves
// every UcxApi entry. Returns nullptr and a reason in *why when the library or a symbol is
// missing; a failed load is retried on the next call (tests hide the library by name).
// A loaded library stays loaded until exit: UCX keeps global state and its own modules.
const UcxApi* ucx_api_load(const std::string& library, std::string* why);

}  // namespace zcx
