// Check macros: one family per error source. Each records the last error and returns.
#pragma once

#include "common/status.h"

#include <cerrno>
#include <cstring>

// A system call returning -1/errno; retries EINTR.
#define ZCX_SYSCHECK(call, subsys, what)                                             \
  do {                                                                               \
    int zcx_rc_;                                                                     \
    do {                                                                             \
      zcx_rc_ = static_cast<int>(call);                                              \
    } while (zcx_rc_ == -1 && errno == EINTR);                                       \
    if (zcx_rc_ == -1)                                                               \
      return ::zcx::set_error(::zcx::Status::kSystem, (subsys), "%s failed: %s", \
                              (what), ::zcx::errno_text(errno));                     \
  } while (0)

// A pthread-style call returning an errno value.
#define ZCX_PTHREADCHECK(call, subsys, what)                                         \
  do {                                                                               \
    int zcx_rc_ = (call);                                                            \
    if (zcx_rc_ != 0)                                                                \
      return ::zcx::set_error(::zcx::Status::kSystem, (subsys), "%s failed: %s", \
                              (what), ::zcx::errno_text(zcx_rc_));                   \
  } while (0)

// Argument validation at API boundaries.
#define ZCX_CHECK_ARG(cond, subsys, ...)                                             \
  do {                                                                               \
    if (!(cond)) return ::zcx::set_error(::zcx::Status::kInvalidArg, (subsys), __VA_ARGS__); \
  } while (0)
