// One logger for all of zcx: levels, subsystem mask, optional file sink, NCCL hook.
//   ZCX_DEBUG=NONE|VERSION|WARN|INFO|TRACE   (default WARN)
//   ZCX_DEBUG_SUBSYS=INIT,NET,...  or ^SHM to exclude (default ALL)
//   ZCX_DEBUG_FILE=path with %h host, %p pid, %r rank
#pragma once

#include <cstdint>

namespace zcx {

enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 5 };

// Subsystem bits. Names are listed in log.cc (kSubsysNames) for ZCX_DEBUG_SUBSYS.
enum LogSubsys : uint32_t {
  kLogInit = 1u << 0,
  kLogNet = 1u << 1,
  kLogShm = 1u << 2,
  kLogIb = 1u << 3,
  kLogColl = 1u << 4,
  kLogTuning = 1u << 5,
  kLogBootstrap = 1u << 6,
  kLogTcp = 1u << 7,
  kLogUcx = 1u << 8,
  kLogCuda = 1u << 9,
  kLogPlugin = 1u << 10,
  kLogEnv = 1u << 11,
  kLogMem = 1u << 12,
  kLogAll = 0xffffffffu,
};

// External sink (the NCCL plugin routes through NCCL's logger). Receives formatted text.
using LogSink = void (*)(LogLevel level, uint32_t subsys, const char* file, int line,
                         const char* message);

bool log_enabled(LogLevel level, uint32_t subsys);
void log_write(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
void log_set_sink(LogSink sink);
void log_set_level(LogLevel level);  // replaces ZCX_DEBUG's level (the plugin under NCCL)
LogLevel log_level();                // the level in force
void log_set_rank(int rank);  // used in the line prefix and for %r in ZCX_DEBUG_FILE
void log_reload();            // re-read ZCX_DEBUG* (tests)
const char* log_subsys_name(uint32_t subsys);
uint32_t log_subsys_from_name(const char* name);  // 0 when unknown

}  // namespace zcx

#define ZCX_LOG(level, subsys, ...)                                         \
  do {                                                                      \
    if (::zcx::log_enabled((level), (subsys)))                              \
      ::zcx::log_write((level), (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define ZCX_WARN(subsys, ...) ZCX_LOG(::zcx::LogLevel::kWarn, (subsys), __VA_ARGS__)
#define ZCX_INFO(subsys, ...) ZCX_LOG(::zcx::LogLevel::kInfo, (subsys), __VA_ARGS__)
#define ZCX_TRACE(subsys, ...) ZCX_LOG(::zcx::LogLevel::kTrace, (subsys), __VA_ARGS__)
