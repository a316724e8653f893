// zcx.hpp: header-only RAII wrappers around the C API (zcx.h), in namespace zcx::api (zcx
// itself is the library's internal namespace). No exceptions: fallible
// operations return zcx::api::Result<T> (a value or a status) or a zcx_status_t.
//
//   auto ctx = zcx::api::Context::from_env();
//   if (!ctx) { fprintf(stderr, "%s\n", ctx.error_message()); return 1; }
//   auto ep = ctx->endpoint(1);
//   if (ep) ep->send(buf, n);
#ifndef ZCX_ZCX_HPP
#define ZCX_ZCX_HPP

#include <zcx/zcx.h>

#include <cstddef>
#include <string>
#include <utility>

namespace zcx::api {

// A value or a status (like std::expected<T, zcx_status_t>), with the thread's last error
// message captured at the failure.
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)), status_(ZCX_SUCCESS) {}
  static Result failure(zcx_status_t s) { return Result(s, zcx_get_last_error()); }
  bool ok() const { return status_ == ZCX_SUCCESS; }
  explicit operator bool() const { return ok(); }
  zcx_status_t status() const { return status_; }
  const char* error_message() const { return message_.c_str(); }
  T& value() & { return value_; }
  T&& value() && { return std::move(value_); }
  T* operator->() { return &value_; }
  T& operator*() { return value_; }

 private:
  Result(zcx_status_t s, const char* msg) : status_(s), message_(msg ? msg : "") {}
  T value_{};
  zcx_status_t status_;
  std::string message_;
};

// An outstanding isend/irecv. Destroying one that is still open waits for it (bounded by
// ZCX_TIMEOUT), so buffers are never left in use behind the caller's back.
class Request {
 public:
  Request() = default;
  explicit Request(zcx_request_t r) : req_(r) {}
  ~Request() { (void)wait(); }
  Request(Request&& o) noexcept : req_(std::exchange(o.req_, nullptr)) {}
  Request& operator=(Request&& o) noexcept {
    if (this != &o) {
      (void)wait();
      req_ = std::exchange(o.req_, nullptr);
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  bool pending() const { return req_ != nullptr; }
  // ZCX_SUCCESS with *done set; the request is finished once done (or on an error).
  zcx_status_t test(bool* done, size_t* size = nullptr) {
    if (req_ == nullptr) {
      *done = true;
      return ZCX_SUCCESS;
    }
    int d = 0;
    zcx_status_t s = zcx_test(req_, &d, size);
    *done = d != 0;
    if (d || s != ZCX_SUCCESS) req_ = nullptr;
    return s;
  }
  // On ZCX_ERR_TIMEOUT the request stays pending.
  zcx_status_t wait(size_t* size = nullptr) {
    if (req_ == nullptr) return ZCX_SUCCESS;
    zcx_status_t s = zcx_wait(req_, size);
    if (s != ZCX_ERR_TIMEOUT) req_ = nullptr;
    return s;
  }

 private:
  zcx_request_t req_ = nullptr;
};

// A link to one peer; owned by its Context (valid until the context is finalized).
class Endpoint {
 public:
  Endpoint() = default;
  explicit Endpoint(zcx_endpoint_t ep) : ep_(ep) {}
  zcx_endpoint_t get() const { return ep_; }
  const char* provider() const {
    const char* name = "";
    return zcx_endpoint_provider(ep_, &name) == ZCX_SUCCESS ? name : "";
  }
  Result<Request> isend(const void* buf, size_t size) {
    zcx_request_t r = nullptr;
    zcx_status_t s = zcx_isend(ep_, buf, size, &r);
    if (s != ZCX_SUCCESS) return Result<Request>::failure(s);
    return Result<Request>(Request(r));
  }
  Result<Request> irecv(void* buf, size_t size) {
    zcx_request_t r = nullptr;
    zcx_status_t s = zcx_irecv(ep_, buf, size, &r);
    if (s != ZCX_SUCCESS) return Result<Request>::failure(s);
    return Result<Request>(Request(r));
  }
  zcx_status_t send(const void* buf, size_t size) { return zcx_send(ep_, buf, size); }
  zcx_status_t recv(void* buf, size_t size, size_t* received = nullptr) {
    return zcx_recv(ep_, buf, size, received);
  }

 private:
  zcx_endpoint_t ep_ = nullptr;
};

// One rank's membership in a job; finalized on destruction.
class Context {
 public:
  Context() = default;
  ~Context() { reset(); }
  Context(Context&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}
  Context& operator=(Context&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::exchange(o.ctx_, nullptr);
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  static Result<zcx_unique_id_t> unique_id() {
    zcx_unique_id_t id{};
    zcx_status_t s = zcx_get_unique_id(&id);
    if (s != ZCX_SUCCESS) return Result<zcx_unique_id_t>::failure(s);
    return Result<zcx_unique_id_t>(id);
  }
  static Result<Context> init_rank(int nranks, const zcx_unique_id_t& id, int rank) {
    zcx_context_t c = nullptr;
    zcx_status_t s = zcx_init_rank(&c, nranks, &id, rank);
    if (s != ZCX_SUCCESS) return Result<Context>::failure(s);
    return Result<Context>(Context(c));
  }
  static Result<Context> from_env() {
    zcx_context_t c = nullptr;
    zcx_status_t s = zcx_init_from_env(&c);
    if (s != ZCX_SUCCESS) return Result<Context>::failure(s);
    return Result<Context>(Context(c));
  }

  zcx_context_t get() const { return ctx_; }
  int rank() const {
    int r = -1;
    return zcx_rank(ctx_, &r) == ZCX_SUCCESS ? r : -1;
  }
  int nranks() const {
    int n = -1;
    return zcx_nranks(ctx_, &n) == ZCX_SUCCESS ? n : -1;
  }
  zcx_status_t barrier() { return zcx_barrier(ctx_); }
  zcx_status_t abort() { return zcx_abort(ctx_); }
  Result<Endpoint> endpoint(int peer) {
    zcx_endpoint_t ep = nullptr;
    zcx_status_t s = zcx_endpoint_get(ctx_, peer, &ep);
    if (s != ZCX_SUCCESS) return Result<Endpoint>::failure(s);
    return Result<Endpoint>(Endpoint(ep));
  }
  void reset() {
    if (ctx_ != nullptr) (void)zcx_finalize(std::exchange(ctx_, nullptr));
  }

 private:
  explicit Context(zcx_context_t c) : ctx_(c) {}
  zcx_context_t ctx_ = nullptr;
};

}  // namespace zcx::api

#endif  // ZCX_ZCX_HPP
