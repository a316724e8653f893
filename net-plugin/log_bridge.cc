#include "log_bridge.h"

#include "common/config.h"
#include "common/config_vars.h"
#include "common/log.h"

#include <atomic>

namespace zcx::plugin {
namespace {

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

ncclDebugLogLevel nccl_level(LogLevel level) {
  switch (level) {
    case LogLevel::kVersion: return NCCL_LOG_VERSION;
    case LogLevel::kWarn: return NCCL_LOG_WARN;
    case LogLevel::kInfo: return NCCL_LOG_INFO;
    case LogLevel::kTrace: return NCCL_LOG_TRACE;
    default: return NCCL_LOG_NONE;
  }
}

void bridge(LogLevel level, uint32_t subsys, const char* file, int line, const char* message) {
  ncclDebugLogger_t logger = g_logger.load(std::memory_order_acquire);
  if (logger == nullptr) return;
  unsigned long flags = NCCL_NET;
  if (subsys & kLogInit) flags |= NCCL_INIT;
  if (subsys & kLogEnv) flags |= NCCL_ENV;
  logger(nccl_level(level), flags, file, line, "NET/zcx %s", message);
}

}  // namespace

void log_bridge_attach(ncclDebugLogger_t logger) {
  if (logger == nullptr) return;
  bool first = g_logger.exchange(logger) == nullptr;
  log_set_sink(bridge);
  // NCCL_DEBUG filters from here on: pass INFO through unless the user chose a ZCX_DEBUG.
  // (A level, not a config override: an override that is never cleared would keep every
  // Param::get() on the registry's locked path.)
  if (first && !params::debug.raw().has_value()) log_set_level(LogLevel::kInfo);
}

}  // namespace zcx::plugin
