#include "common/status.h"

#include "common/log.h"

#include <cstdio>

namespace zcx {
namespace {
thread_local std::string t_last_error;
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
  t_last_error = buf;
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
  t_last_error = buf;
  return s;
}

const char* last_error() { return t_last_error.c_str(); }
void clear_last_error() { t_last_error.clear(); }

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
