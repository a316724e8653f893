#include "common/log.h"

#include "common/bootstrap/bootstrap.h"
#include "common/config_vars.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <mutex>
#include <string>

namespace zcx {
namespace {

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kLogInit}, {"NET", kLogNet},   {"SHM", kLogShm},       {"IB", kLogIb},
    {"COLL", kLogColl}, {"TUNING", kLogTuning}, {"BOOTSTRAP", kLogBootstrap},
    {"TCP", kLogTcp},   {"UCX", kLogUcx},   {"CUDA", kLogCuda},     {"PLUGIN", kLogPlugin},
    {"ENV", kLogEnv},   {"MEM", kLogMem},   {"ALL", kLogAll},
};

struct LogState {
  std::atomic<int> level{static_cast<int>(LogLevel::kWarn)};
  std::atomic<uint32_t> mask{kLogAll};
  std::atomic<bool> ready{false};
  std::atomic<LogSink> sink{nullptr};
  std::atomic<int> rank{-1};
  std::mutex mu;  // guards file and init
  int fd = 2;
  bool file_open = false;
};

LogState& state() {
  static LogState* s = new LogState();  // never destroyed: logging works during teardown
  return *s;
}

thread_local bool t_initializing = false;

// The logger cannot log about its own settings while it starts: straight to stderr.
void warn_setting(const char* what) { fprintf(stderr, "zcx: %s\n", what); }

// Any case, as NCCL_DEBUG takes it ("info" as well as "INFO").
LogLevel parse_level(const std::string& text) {
  const char* names[] = {"NONE", "VERSION", "WARN", "INFO", "TRACE"};
  const LogLevel levels[] = {LogLevel::kNone, LogLevel::kVersion, LogLevel::kWarn,
                             LogLevel::kInfo, LogLevel::kTrace};
  for (size_t i = 0; i < std::size(names); ++i)
    if (strcasecmp(text.c_str(), names[i]) == 0) return levels[i];
  std::string msg = "ZCX_DEBUG='" + text.substr(0, 64) +
                    "' is not NONE, VERSION, WARN, INFO or TRACE; using WARN";
  warn_setting(msg.c_str());
  return LogLevel::kWarn;
}

uint32_t parse_mask(std::string text) {
  bool exclude = !text.empty() && text[0] == '^';
  if (exclude) text.erase(0, 1);
  uint32_t mask = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string name = text.substr(pos, comma - pos);
    const uint32_t bit = log_subsys_from_name(name.c_str());
    if (bit == 0 && !name.empty()) {
      std::string msg = "ZCX_DEBUG_SUBSYS: no subsystem '" + name.substr(0, 32) + "' (names:";
      for (const SubsysName& n : kSubsysNames) msg += std::string(" ") + n.name;
      warn_setting((msg + ")").c_str());
    }
    mask |= bit;
    pos = comma + 1;
  }
  return exclude ? ~mask : (mask == 0 ? kLogAll : mask);
}

// %r before the bootstrap has set the rank (the file opens at the first message): the rank
// the launcher environment gives, as zcx_init_from_env reads it, else "x". Raw text only: a
// parameter's warning would log, and the logger is starting.
std::string launcher_rank() {
  const std::optional<std::string> v = launcher_rank_text();
  const bool digits = v && !v->empty() && v->size() < 9 &&
                      v->find_first_not_of("0123456789") == std::string::npos;
  return digits ? *v : "x";
}

std::string expand_file_name(const std::string& pattern, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char c = pattern[++i];
    if (c == 'h') {
      char host[256] = "unknown";
      gethostname(host, sizeof host - 1);
      out += host;
    } else if (c == 'p') {
      out += std::to_string(getpid());
    } else if (c == 'r') {
      out += rank >= 0 ? std::to_string(rank) : launcher_rank();
    } else {
      out += '%';
      out += c;
    }
  }
  return out;
}

// Opens ZCX_DEBUG_FILE without following a planted symlink, mode 0600.
void open_log_file(LogState& s) {
  std::string pattern = params::debug_file.get();
  if (pattern.empty() || s.file_open) return;
  std::string path = expand_file_name(pattern, s.rank.load());
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    fprintf(stderr, "zcx: cannot open ZCX_DEBUG_FILE %s: %s; logging to stderr\n",
            path.c_str(), errno_text(errno));
    return;
  }
  s.fd = fd;
  s.file_open = true;
}

void init_locked(LogState& s) {
  t_initializing = true;
  s.level = static_cast<int>(parse_level(params::debug.get()));
  s.mask = parse_mask(params::debug_subsys.get());
  open_log_file(s);
  t_initializing = false;
  s.ready = true;
}

void ensure_init() {
  LogState& s = state();
  if (s.ready.load(std::memory_order_acquire) || t_initializing) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.ready) init_locked(s);
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kVersion: return "VERSION";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
    default: return "";
  }
}

}  // namespace

bool log_enabled(LogLevel level, uint32_t subsys) {
  ensure_init();
  LogState& s = state();
  return static_cast<int>(level) <= s.level.load(std::memory_order_relaxed) &&
         (subsys & s.mask.load(std::memory_order_relaxed)) != 0;
}

void log_write(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt,
               ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  LogState& s = state();
  if (LogSink sink = s.sink.load()) {
    sink(level, subsys, file, line, msg);
    return;
  }
  static char host[64] = "";
  if (host[0] == '\0') gethostname(host, sizeof host - 1);
  char out[2300];
  int rank = s.rank.load();
  int n = snprintf(out, sizeof out, "%s:%d:%ld [%d] zcx %s %s: %s\n", host, getpid(),
                   static_cast<long>(syscall(SYS_gettid)), rank, level_name(level),
                   log_subsys_name(subsys), msg);
  if (n < 0) return;
  size_t len = static_cast<size_t>(n) < sizeof out ? static_cast<size_t>(n) : sizeof out - 1;
  std::lock_guard<std::mutex> lock(s.mu);
  ssize_t w = write(s.fd, out, len);
  (void)w;  // nothing sensible to do when the log sink fails
}

void log_set_sink(LogSink sink) { state().sink = sink; }

void log_set_level(LogLevel level) {
  ensure_init();  // the rest of ZCX_DEBUG* first, so that a later first use cannot undo it
  state().level = static_cast<int>(level);
}

LogLevel log_level() {
  ensure_init();
  return static_cast<LogLevel>(state().level.load(std::memory_order_relaxed));
}

void log_set_rank(int rank) { state().rank = rank; }

void log_reload() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.file_open) close(s.fd);
  s.fd = 2;
  s.file_open = false;
  init_locked(s);
}

const char* log_subsys_name(uint32_t subsys) {
  for (const SubsysName& n : kSubsysNames)
    if (n.bit == subsys) return n.name;
  return "MULTI";
}

uint32_t log_subsys_from_name(const char* name) {
  for (const SubsysName& n : kSubsysNames)
    if (strcasecmp(n.name, name) == 0) return n.bit;
  return 0;
}

}  // namespace zcx
