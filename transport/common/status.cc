#include "common/status.h"

#include "common/log.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace zcx {
namespace {
// A plain array, not std::string: a thread_local with a destructor registers a TLS
// destructor, and glibc then keeps the library mapped after dlclose until every thread
// that ever failed exits (the NCCL plugin must unload and reload cleanly).
thread_local char t_last_error[1024];
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kSuccess: return "success";
    case Status::kInProgress: return "in progress";
    case Status::kInvalidArg: return "invalid argument";
    case Status::kInvalidUsage: return "invalid usage";
    case Status::kUnsupported: return "unsupported";
    case Status::kNoMemory: return "out of memory";
    case Status::kNoDevice: return "no device";
    case Status::kSystem: return "system error";
    case Status::kRemote: return "remote error";
    case Status::kTimeout: return "timeout";
    case Status::kProtocol: return "protocol error";
    case Status::kAuth: return "authentication failed";
    case Status::kAborted: return "aborted";
    case Status::kMismatch: return "mismatch between ranks";
    case Status::kInternal: return "internal error";
  }
  return "unknown status";
}

Status set_error_v(Status s, uint32_t subsys, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  snprintf(t_last_error, sizeof t_last_error, "%s", buf);
  ZCX_WARN(subsys, "%s", buf);
  return s;
}

Status set_error(Status s, uint32_t subsys, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Status r = set_error_v(s, subsys, fmt, ap);
  va_end(ap);
  return r;
}

Status set_error_quiet(Status s, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  snprintf(t_last_error, sizeof t_last_error, "%s", buf);
  return s;
}

const char* last_error() { return t_last_error; }

const char* errno_text(int err) {
  if (err == EMFILE)
    return "Too many open files: this process reached its open-file limit (RLIMIT_NOFILE; "
           "raise it with ulimit -n)";
  if (err == ENFILE) return "Too many open files in system: the system's file table is full (fs.file-max)";
  return strerror(err);
}
void clear_last_error() { t_last_error[0] = '\0'; }

void StickyError::record(Status s, std::string message) {
  if (status_ != Status::kSuccess || !failed(s)) return;
  status_ = s;
  message_ = std::move(message);
}

Status StickyError::raise() const {
  if (status_ == Status::kSuccess) return status_;
  return set_error_quiet(status_, "%s", message_.c_str());
}

}  // namespace zcx
