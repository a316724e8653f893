// The data path of the ucx provider: tagged sends and receives, grouped receives by probing,
// and test(), which drives ucp_worker_progress. The hot path is one UCP call per operation
// plus a few field writes; no allocation once the request pool has warmed up.
#include "ucx/ucx.h"
#include "ucx/ucx_config.h"

#include "common/clock.h"
#include "common/config_vars.h"

#include <algorithm>

namespace zcx::ucx {
namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

Request* request_get(CommBase* c) {
  Request* r;
  if (c->spare.empty()) {
    r = new Request;
  } else {
    r = c->spare.back();
    c->spare.pop_back();
    *r = Request{};
  }
  r->comm = c;
  r->next = c->live;
  if (c->live != nullptr) c->live->prev = r;
  c->live = r;
  r->posted_ns = now_ns();
  return r;
}

void group_forget(Request* r) {
  if (!r->grouped) return;
  std::vector<Request*>& g = r->comm->ctx->groups;
  g.erase(std::remove(g.begin(), g.end(), r), g.end());
}

void request_put(Request* r) {
  CommBase* c = r->comm;
  group_forget(r);
  if (r->prev != nullptr) r->prev->next = r->next;
  else c->live = r->next;
  if (r->next != nullptr) r->next->prev = r->prev;
  c->spare.push_back(r);
}

ucp_request_param_t op_param(const CommBase* c, Mr* mr, ucp_tag_recv_info_t* info) {
  ucp_request_param_t param{};
  if (mr != nullptr && c->use_memh) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = mr->memh;
  }
  if (info != nullptr) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_RECV_INFO;
    param.recv_info.tag_info = info;
  }
  return param;
}

// Records the comm's first failure and returns it (later calls re-raise the same text).
Status fail(CommBase* c, Status s, const char* what, ucs_status_t ucs) {
  if (!c->failure.has()) {
    Status st = set_error(s, kLog, "ucx %s %s: %s", what, c->peer.text().c_str(),
                          ucs_text(c->ctx, ucs));
    c->failure.record(st, last_error());
  }
  return c->failure.raise();
}

Status fail_status(CommBase* c, ucs_status_t s, size_t posted) {
  if (s == UCS_ERR_MESSAGE_TRUNCATED) {
    if (!c->failure.has()) {
      Status st = set_error(Status::kInvalidUsage, kLog, "ucx: message truncated: %s sent "
                            "more than the %zu bytes posted for it", c->peer.text().c_str(),
                            posted);
      c->failure.record(st, last_error());
    }
    return c->failure.raise();
  }
  if (s == UCS_ERR_CANCELED) return fail(c, Status::kAborted, "request with", s);
  return fail(c, Status::kRemote, c->is_send ? "send to" : "receive from", s);
}

Status check_alive(CommBase* c) {
  if (c->failure.has()) return c->failure.raise();
  ucs_status_t s = c->ep_error->status;
  if (s == UCS_OK && c->small_ep_error) s = c->small_ep_error->status;
  if (s != UCS_OK)
    return fail(c, Status::kRemote, "connection with peer failed (it died, closed the "
                "connection or is unreachable):", s);
  return Status::kSuccess;
}

// Grouped receive: claims each of its sequence numbers once UCX has seen that message and
// starts receiving it into the buffer whose tag the sender used.
Status group_progress(Request* r) {
  CommBase* c = r->comm;
  const UcxApi& api = *c->ctx->api;
  for (int j = 0; j < r->n; ++j) {
    if (r->seq_taken[j]) continue;
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = api.tag_probe_nb(
        c->ctx->worker, data_tag(c->conn_id, 0, r->first_seq + j), kAnyUserTagMask, 1, &info);
    if (msg == nullptr) continue;
    r->seq_taken[j] = true;
    int utag = tag_user_bits(info.sender_tag), i = 0;
    while (i < r->n && (r->matched[i] || (r->tags[i] & static_cast<int>(kUserTagMask)) != utag))
      ++i;
    if (i == r->n)
      return fail(c, Status::kInvalidUsage, "grouped receive: a send tag matches no free "
                  "buffer; sender", UCS_ERR_NO_MESSAGE);
    if (info.length > r->sizes[i]) return fail_status(c, UCS_ERR_MESSAGE_TRUNCATED, r->sizes[i]);
    r->matched[i] = true;
    // The probe told the length; UCX 1.13 does not fill recv_info on immediate completion.
    ucp_request_param_t param = op_param(c, nullptr, nullptr);
    ucs_status_ptr_t p = api.tag_msg_recv_nbx(c->ctx->worker, r->data[i], r->sizes[i], msg, &param);
    if (UCS_PTR_IS_ERR(p)) return fail_status(c, UCS_PTR_STATUS(p), r->sizes[i]);
    r->ucp[i] = p;
    r->sizes[i] = info.length;
  }
  return Status::kSuccess;
}

bool all_claimed(const Request* r) {
  for (int j = 0; j < r->n; ++j)
    if (!r->seq_taken[j]) return false;
  return true;
}

// Grouped receives are matched by probing, so every test() on the ctx claims their messages:
// a sender waiting for its rendezvous sends must not depend on the receiver testing exactly
// the grouped request. A failure is kept on that request's comm and reported there.
void progress_groups(Ctx* ctx) {
  for (size_t i = 0; i < ctx->groups.size();) {
    Request* r = ctx->groups[i];
    Status s = r->comm->failure.has() ? Status::kSuccess : group_progress(r);
    (void)s;  // recorded in r->comm->failure by fail()
    if (r->comm->failure.has() || all_claimed(r))
      ctx->groups.erase(ctx->groups.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
}

// UCS_INPROGRESS, or the final status of buffer i (its UCP request freed, size recorded).
ucs_status_t poll_buffer(Request* r, int i) {
  const UcxApi& api = *r->comm->ctx->api;
  void* req = r->ucp[i];
  ucs_status_t s;
  if (r->comm->is_send) {
    s = api.request_check_status(req);
  } else {
    ucp_tag_recv_info_t info{};
    s = api.tag_recv_request_test(req, &info);
    if (s == UCS_OK) r->sizes[i] = info.length;
  }
  if (s != UCS_INPROGRESS) {
    api.request_free(req);
    r->ucp[i] = nullptr;
  }
  return s;
}

// After the peer closed its comm, a request it never posted a partner for fails at once; one
// it did post may still finish (data or acknowledgements in flight) and gets a short grace.
constexpr int64_t kCloseGraceNs = 3'000'000'000;

Status check_peer_closed(Request* r) {
  CommBase* c = r->comm;
  if (!c->peer_closed) return Status::kSuccess;
  uint32_t last = r->first_seq + static_cast<uint32_t>(r->n) - 1;
  bool beyond = static_cast<int32_t>(last - static_cast<uint32_t>(c->peer_count)) >= 0;
  if (!beyond && now_ns() - c->peer_closed_ns < kCloseGraceNs) return Status::kSuccess;
  if (!c->failure.has()) {
    Status st = set_error(Status::kRemote, kLog, "ucx: %s closed the connection (after %llu "
                          "messages) while this %s was pending", c->peer.text().c_str(),
                          static_cast<unsigned long long>(c->peer_count),
                          c->is_send ? "send" : "receive");
    c->failure.record(st, last_error());
  }
  return c->failure.raise();
}

// A pending request: fails when the peer died or closed, or nothing moved for ZCX_TIMEOUT.
// The side channel is read at most every millisecond, so test() stays cheap.
Status check_stalled(Request* r) {
  CommBase* c = r->comm;
  ZCX_TRY(check_alive(c));
  int64_t now = now_ns();
  if (now >= c->next_sock_check_ns) {
    c->next_sock_check_ns = now + 1000000;
    Status s = poll_side_channel(c);
    if (!ok(s) && !c->failure.has()) c->failure.record(s, last_error());
    ZCX_TRY(check_alive(c));
    ZCX_TRY(check_peer_closed(r));
  }
  int64_t since = std::max(r->posted_ns, c->last_activity_ns);
  if (now - since <= c->timeout_ms * 1000000) return Status::kSuccess;
  if (!c->failure.has()) {
    Status st = set_error(Status::kTimeout, kLog, "ucx: no progress %s %s for ZCX_TIMEOUT "
                          "(%lld ms): is it alive and still calling zcx?",
                          c->is_send ? "sending to" : "receiving from", c->peer.text().c_str(),
                          static_cast<long long>(c->timeout_ms));
    c->failure.record(st, last_error());
  }
  return c->failure.raise();
}

}  // namespace

Status isend(SendComm* c, void* data, size_t size, int tag, Mr* mr, Request** out) {
  *out = nullptr;
  Lock lock(c->ctx->mu);
  ZCX_TRY(check_alive(c));
  if (c->handshake != nullptr) {  // half-open: "retry later" until the ack is in
    Status s = handshake_progress(c);
    if (s == Status::kInProgress) return Status::kSuccess;
    if (!ok(s)) {
      c->failure.record(s, last_error());
      return s;
    }
  }
  ucp_request_param_t param = op_param(c, mr, nullptr);
  ucp_ep_h ep = c->small_ep != nullptr && size < c->sockaddr_min ? c->small_ep : c->ep;
  ucs_status_ptr_t p = c->ctx->api->tag_send_nbx(ep, data, size,
                                                 data_tag(c->conn_id, tag, c->seq), &param);
  if (UCS_PTR_IS_ERR(p)) return fail_status(c, UCS_PTR_STATUS(p), size);
  ++c->seq;
  Request* r = request_get(c);
  r->ucp[0] = p;
  r->sizes[0] = size;
  *out = r;
  return Status::kSuccess;
}

Status irecv(RecvComm* c, int n, void** data, size_t* sizes, int* tags, Mr** mrs,
             Request** out) {
  *out = nullptr;
  if (n < 1 || n > kMaxRecvs)
    return set_error(Status::kInvalidArg, kLog, "ucx irecv: n = %d, must be 1..%d", n, kMaxRecvs);
  Lock lock(c->ctx->mu);
  ZCX_TRY(check_alive(c));
  Request* r = request_get(c);
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = data[i];
    r->sizes[i] = sizes[i];
    r->tags[i] = tags != nullptr ? tags[i] : 0;
  }
  r->first_seq = c->seq;
  c->seq += static_cast<uint32_t>(n);
  if (n > 1) {
    r->grouped = true;
    *out = r;
    Status s = group_progress(r);
    if (ok(s) && !all_claimed(r)) c->ctx->groups.push_back(r);
    return s;
  }
  ucp_request_param_t param = op_param(c, mrs != nullptr ? mrs[0] : nullptr, nullptr);
  // Always a request: UCX 1.13 does not fill recv_info when a receive completes at once.
  param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  ucs_status_ptr_t p = c->ctx->api->tag_recv_nbx(
      c->ctx->worker, data[0], sizes[0], data_tag(c->conn_id, 0, r->first_seq), kAnyUserTagMask,
      &param);
  if (UCS_PTR_IS_ERR(p)) {
    request_put(r);
    return fail_status(c, UCS_PTR_STATUS(p), sizes[0]);
  }
  r->ucp[0] = p;
  *out = r;
  return Status::kSuccess;
}

Status test(Request* r, int* done, size_t* sizes) {
  *done = 0;
  CommBase* c = r->comm;
  Lock lock(c->ctx->mu);
  progress(c->ctx);
  if (!c->ctx->groups.empty()) progress_groups(c->ctx);
  if (r->grouped) {
    if (c->failure.has()) return c->failure.raise();
    ZCX_TRY(group_progress(r));
  }
  bool pending = false;
  for (int i = 0; i < r->n; ++i) {
    if (r->grouped && !r->matched[i]) {
      pending = true;
    } else if (r->ucp[i] != nullptr) {
      ucs_status_t s = poll_buffer(r, i);
      if (s == UCS_INPROGRESS) pending = true;
      else if (s != UCS_OK) return fail_status(c, s, r->sizes[i]);
    }
  }
  if (pending) return check_stalled(r);
  c->last_activity_ns = now_ns();
  if (sizes != nullptr)
    for (int i = 0; i < r->n; ++i) sizes[i] = r->sizes[i];
  *done = 1;
  request_put(r);
  return Status::kSuccess;
}

// Drops what is in flight (close with requests pending is allowed by the contract). A
// receive UCX has already matched cannot be cancelled; it ends when its data lands or UCX
// sees the sender fail, so it gets a bounded wait. One that outlives it would make
// ucp_worker_destroy assert, so the ctx then leaves its worker to process exit.
void drop_requests(CommBase* c) {
  const UcxApi& api = *c->ctx->api;
  std::vector<void*> stuck;
  while (c->live != nullptr) {
    Request* r = c->live;
    for (int i = 0; i < r->n; ++i) {
      void* req = r->ucp[i];
      if (req == nullptr) continue;
      if (!c->is_send && api.request_check_status(req) == UCS_INPROGRESS)
        api.request_cancel(c->ctx->worker, req);
      if (!c->is_send && api.request_check_status(req) == UCS_INPROGRESS)
        stuck.push_back(req);
      else
        api.request_free(req);
    }
    request_put(r);
  }
  Deadline dl = Deadline::after_ms(std::min<int64_t>(zcx::params::timeout_ms(), 2000));
  while (!stuck.empty() && !dl.expired()) {
    progress(c->ctx);  // not bare worker progress: connection requests are answered too
    std::erase_if(stuck, [&](void* req) {
      if (api.request_check_status(req) == UCS_INPROGRESS) return false;
      api.request_free(req);
      return true;
    });
  }
  for (void* req : stuck) api.request_free(req);
  if (!stuck.empty()) {
    c->ctx->worker_unsafe = true;
    ZCX_INFO(kLog, "ucx: %zu receives from %s still in flight at close; the UCX worker will "
             "be left to process exit", stuck.size(), c->peer.text().c_str());
  }
  for (Request* r : c->spare) delete r;
  c->spare.clear();
}

}  // namespace zcx::ucx
