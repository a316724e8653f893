// UCX's sockaddr connection manager behind the side channel. The handshake still runs over
// the zcx socket (auth, identity, connection id); then, when the acceptor's ctx has a
// ucp_listener, the connector makes its endpoint to that listener rather than from the
// worker address. Why: UCX 1.13 keeps the zero-copy rendezvous lanes (rma_bw) of an error-
// mode-PEER endpoint only on lanes connected endpoint-to-endpoint, which for tcp it does
// only when a connection manager made the endpoint. From a worker address a PEER endpoint
// over tcp moves large messages through active messages on one socket, at about half the
// bandwidth at 1 MiB (docs/PERFORMANCE.md). With shared-memory-only UCX_TLS the manager
// cannot connect at all ("Destination is unreachable"), so the acceptor offers its
// listener, and the connector uses it, only where their UCX uses a tcp resource; otherwise
// the connector uses the worker address, which is why the handshake still carries it.
#include "ucx/ucx.h"
#include "ucx/ucx_config.h"

#include "common/clock.h"
#include "common/config_vars.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace zcx::ucx {
namespace {

void on_conn_request(ucp_conn_request_h request, void* arg) {
  static_cast<Ctx*>(arg)->conn_requests.push_back(request);
}

uint16_t bound_port(Ctx* ctx) {
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ctx->api->listener_query(ctx->ucp_listener, &attr) != UCS_OK) return 0;
  SockAddr bound;
  bound.storage = attr.sockaddr;
  return static_cast<uint16_t>(bound.port());
}

std::string ip_of(SockAddr addr) {
  addr.set_port(0);
  return addr.to_string();
}

// Takes one expected connection from the request's client IP; false: nobody there passed
// the handshake.
bool take_expected(Ctx* ctx, ucp_conn_request_h request) {
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (ctx->api->conn_request_query(request, &attr) != UCS_OK) return false;
  SockAddr client;
  client.storage = attr.client_address;
  client.len = sizeof(client.storage);
  auto it = ctx->sockaddr_expected.find(ip_of(client));
  if (it == ctx->sockaddr_expected.end()) {
    ZCX_WARN(kLog, "ucx: dropped a UCX connection request from %s: no zcx handshake from there",
             client.to_string().c_str());
    return false;
  }
  if (--it->second == 0) ctx->sockaddr_expected.erase(it);
  return true;
}

// Accepts one connection request: the endpoint only keeps the connection; nothing sends on
// it. An unexpected request is accepted and closed at once rather than refused:
// ucp_listener_reject can crash UCX's async thread over tcp (openucx/ucx#11235).
void accept_request(Ctx* ctx, ucp_conn_request_h request, bool expected) {
  ServerEp sep;
  sep.box = std::make_unique<EpError>();
  sep.box->any_failed = &ctx->server_ep_failed;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler = error_handler(sep.box.get());
  // On failure UCX rejects the request itself; the connector's sends then fail, naming us.
  ucs_status_t s = ctx->api->ep_create(ctx->worker, &params, &sep.ep);
  if (s != UCS_OK) {
    ZCX_INFO(kLog, "ucx: sockaddr connection request refused: %s", ucs_text(ctx, s));
    return;
  }
  if (!expected) sep.box->status = UCS_ERR_REJECTED;  // closed by the next sweep
  ctx->server_eps.push_back(std::move(sep));
  if (!expected) ctx->server_ep_failed = true;
}

// Whether UCX uses a tcp resource here. UCP has no query for its transports, so this reads
// the resource lines ("resource 0 : md 0 dev 0 flags -- tcp/lo") UCX prints for a context.
// Without tcp a sockaddr endpoint cannot connect (UCX_TLS=posix,cma: "no active messages
// transport", an ERROR line from UCX for every try), so neither side uses the manager then.
bool context_uses_tcp(Ctx* ctx) {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == nullptr) return false;
  ctx->api->context_print_info(ctx->context, f);
  fclose(f);
  bool tcp = false;
  for (const char* line = text; line != nullptr && *line != '\0' && !tcp;) {
    const char* end = strchr(line, '\n');
    std::string_view l(line, end != nullptr ? static_cast<size_t>(end - line) : strlen(line));
    tcp = l.find("resource") != std::string_view::npos && l.find(" tcp/") != std::string_view::npos;
    line = end != nullptr ? end + 1 : nullptr;
  }
  free(text);
  return tcp;
}

}  // namespace

bool sockaddr_usable(Ctx* ctx) {
  if (ctx->sockaddr_usable < 0) {
    ctx->sockaddr_usable = params::sockaddr.get() && context_uses_tcp(ctx) ? 1 : 0;
    if (ctx->sockaddr_usable == 0)
      ZCX_INFO(kLog, "ucx: endpoints come from worker addresses (%s)",
               params::sockaddr.get() ? "UCX uses no tcp resource" : "ZCX_UCX_SOCKADDR=0");
  }
  return ctx->sockaddr_usable == 1;
}

void ucp_listener_start(Ctx* ctx, const SockAddr& local) {
  if (ctx->ucp_listener_tried || !sockaddr_usable(ctx)) return;
  ctx->ucp_listener_tried = true;
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = local.sa();
  params.sockaddr.addrlen = local.len;
  params.conn_handler.cb = on_conn_request;
  params.conn_handler.arg = ctx;
  ucs_status_t s = ctx->api->listener_create(ctx->worker, &params, &ctx->ucp_listener);
  if (s != UCS_OK) {
    ctx->ucp_listener = nullptr;
    ZCX_INFO(kLog, "ucx: no ucp_listener on %s (%s): endpoints come from worker addresses",
             local.to_string().c_str(), ucs_text(ctx, s));
    return;
  }
  ctx->ucp_listener_port = bound_port(ctx);
  ZCX_INFO(kLog, "ucx: ucp_listener on %s, port %u", local.to_string().c_str(),
           ctx->ucp_listener_port);
}

void sockaddr_expect(Ctx* ctx, const SockAddr& connector) {
  ++ctx->sockaddr_expected[ip_of(connector)];
}

namespace {

void close_server_ep(Ctx* ctx, ServerEp& sep) {
  if (sep.box->status == UCS_OK) sep.box->status = UCS_ERR_CANCELED;  // ask for a force close
  sep.box->any_failed = nullptr;
  ep_close(ctx, sep.ep, std::move(sep.box));
}

// Force-closes the server endpoints whose connector went away (their error callback fired).
void sweep_server_eps(Ctx* ctx) {
  ctx->server_ep_failed = false;
  std::vector<ServerEp> eps;
  eps.swap(ctx->server_eps);
  for (ServerEp& sep : eps) {
    if (sep.box->status == UCS_OK) ctx->server_eps.push_back(std::move(sep));
    else close_server_ep(ctx, sep);
  }
}

// Before the listener goes: a connector that got our ack may still be on its way, and UCX
// can crash when a request reaches a listener being destroyed (openucx/ucx#11087). So wait,
// bounded, until every expected request has arrived and been taken (progress() takes them).
void await_expected_requests(Ctx* ctx) {
  Deadline dl = Deadline::after_ms(std::min<int64_t>(zcx::params::timeout_ms(), 2000));
  while (!ctx->sockaddr_expected.empty() && !dl.expired()) progress(ctx);
  if (!ctx->sockaddr_expected.empty())
    ZCX_INFO(kLog, "ucx: %zu expected UCX connection request(s) never came; closing the "
             "ucp_listener anyway", ctx->sockaddr_expected.size());
}

}  // namespace

void take_conn_requests(Ctx* ctx) {
  if (ctx->server_ep_failed) sweep_server_eps(ctx);
  if (ctx->conn_requests.empty()) return;
  std::vector<ucp_conn_request_h> requests;
  requests.swap(ctx->conn_requests);
  for (ucp_conn_request_h request : requests)
    accept_request(ctx, request, take_expected(ctx, request));
}

void sockaddr_shutdown(Ctx* ctx) {
  if (ctx->ucp_listener != nullptr) await_expected_requests(ctx);
  std::vector<ServerEp> eps;
  eps.swap(ctx->server_eps);
  for (ServerEp& sep : eps) close_server_ep(ctx, sep);
  if (ctx->ucp_listener == nullptr) return;
  ctx->api->listener_destroy(ctx->ucp_listener);
  ctx->ucp_listener = nullptr;
}

// UCX queues sends on the endpoint until the acceptor's worker has answered the connection
// request, so the comm is usable at once; waiting here instead would stall a caller that
// drives the acceptor's ctx only between its own sends.
Status sockaddr_ep_create(CommBase* c, const SockAddr& addr) {
  Ctx* ctx = c->ctx;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = addr.sa();
  params.sockaddr.addrlen = addr.len;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler = error_handler(c->ep_error.get());
  ucs_status_t s = ctx->api->ep_create(ctx->worker, &params, &c->ep);
  if (s == UCS_OK) {
    ZCX_INFO(kLog, "ucx: endpoint to %s through UCX's connection manager at %s",
             c->peer.text().c_str(), addr.to_string().c_str());
    return Status::kSuccess;
  }
  c->ep = nullptr;
  return set_error(Status::kRemote, kLog, "ucx: endpoint to %s through UCX's connection "
                   "manager at %s failed: %s (ZCX_UCX_SOCKADDR=0 connects by worker address)",
                   c->peer.text().c_str(), addr.to_string().c_str(), ucs_text(ctx, s));
}

}  // namespace zcx::ucx
