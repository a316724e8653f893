// Status codes inside zcx and the thread-local last-error string.
#pragma once

#include <zcx/zcx.h>

#include "common/log.h"

#include <cstdarg>
#include <string>

namespace zcx {

// Same values as zcx_status_t; [[nodiscard]] so an ignored failure is a compile warning.
enum class [[nodiscard]] Status : int {
  kSuccess = ZCX_SUCCESS,
  kInProgress = ZCX_IN_PROGRESS,
  kInvalidArg = ZCX_ERR_INVALID_ARG,
  kInvalidUsage = ZCX_ERR_INVALID_USAGE,
  kUnsupported = ZCX_ERR_UNSUPPORTED,
  kNoMemory = ZCX_ERR_NO_MEMORY,
  kNoDevice = ZCX_ERR_NO_DEVICE,
  kSystem = ZCX_ERR_SYSTEM,
  kRemote = ZCX_ERR_REMOTE,
  kTimeout = ZCX_ERR_TIMEOUT,
  kProtocol = ZCX_ERR_PROTOCOL,
  kAuth = ZCX_ERR_AUTH,
  kAborted = ZCX_ERR_ABORTED,
  kMismatch = ZCX_ERR_MISMATCH,
  kInternal = ZCX_ERR_INTERNAL,
};

inline constexpr bool ok(Status s) { return s == Status::kSuccess; }
inline constexpr bool failed(Status s) { return s != Status::kSuccess && s != Status::kInProgress; }
inline constexpr zcx_status_t to_c(Status s) { return static_cast<zcx_status_t>(s); }
const char* status_name(Status s);

// Records a printf-style message as this thread's last error, logs it at WARN under
// `subsys` (a LogSubsys bit), and returns `s` so callers can write `return set_error(...)`.
Status set_error(Status s, uint32_t subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
Status set_error_v(Status s, uint32_t subsys, const char* fmt, va_list ap);
// Like set_error but without logging (for expected failures the caller reports itself).
Status set_error_quiet(Status s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* last_error();
void clear_last_error();
// strerror(err), saying for EMFILE and ENFILE which limit was reached and how to raise it
// (every communicator holds a few descriptors per peer: many of them can reach ulimit -n).
const char* errno_text(int err);

// Sticky asynchronous error: the first failure wins and is reported on every later call.
class StickyError {
 public:
  void record(Status s, std::string message);
  bool has() const { return status_ != Status::kSuccess; }
  Status status() const { return status_; }
  // Re-raises the stored error as this thread's last error and returns it.
  Status raise() const;

 private:
  Status status_ = Status::kSuccess;
  std::string message_;
};

}  // namespace zcx

// Propagate a failed Status (kInProgress passes through too: callers decide).
#define ZCX_TRY(expr)                                          \
  do {                                                         \
    ::zcx::Status zcx_try_status_ = (expr);                    \
    if (zcx_try_status_ != ::zcx::Status::kSuccess) return zcx_try_status_; \
  } while (0)
