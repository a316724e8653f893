#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace zcx::run {
namespace {

constexpr int kMaxRanks = 1024;

// Names zcx-run sets itself; --env may not change them.
const char* const kReservedNames[] = {"ZCX_RANK", "ZCX_NRANKS", "ZCX_LOCAL_RANK",
                                      "ZCX_ROOT", "ZCX_SECRET", "ZCX_RUN_JOB"};

bool parse_ranks(const char* text, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 1 || v > kMaxRanks) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_seconds(const char* text, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 1e7)
    return false;
  *out = v;
  return true;
}

std::string check_env(const std::string& kv) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return "--env needs K=V, got '" + kv + "'";
  std::string key = kv.substr(0, eq);
  for (const char* name : kReservedNames)
    if (key == name) return key + " is set by zcx-run for each rank; --env cannot change it";
  return "";
}

// Splits "--opt=value" into name and value; plain options keep value empty.
bool split_inline(const std::string& arg, std::string* name, std::string* value) {
  size_t eq = arg.find('=');
  if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
    *name = arg;
    return false;
  }
  *name = arg.substr(0, eq);
  *value = arg.substr(eq + 1);
  return true;
}

bool takes_value(const std::string& name) {
  return name == "-np" || name == "-n" || name == "--np" || name == "--timeout" ||
         name == "--grace" || name == "--env" || name == "--bind-to";
}

std::string apply(const std::string& name, const std::string& value, Options* out) {
  if (name == "-np" || name == "-n" || name == "--np") {
    if (!parse_ranks(value.c_str(), &out->nranks))
      return "-np needs a whole number from 1 to " + std::to_string(kMaxRanks) + ", got '" +
             value + "'";
  } else if (name == "--timeout") {
    if (!parse_seconds(value.c_str(), &out->timeout_s))
      return "--timeout needs a positive number of seconds, got '" + value + "'";
  } else if (name == "--bind-to") {
    if (value == "core") out->bind = Bind::kCore;
    else if (value == "none") out->bind = Bind::kNone;
    else if (value == "auto") out->bind = Bind::kAuto;
    else return "--bind-to takes core, none or auto, got '" + value + "'";
  } else if (name == "--grace") {
    if (!parse_seconds(value.c_str(), &out->grace_s))
      return "--grace needs a positive number of seconds, got '" + value + "'";
  } else {
    std::string bad = check_env(value);
    if (!bad.empty()) return bad;
    out->env.push_back(value);
  }
  return "";
}

}  // namespace

ParseResult parse_options(int argc, char** argv, Options* out, std::string* error) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i], name, value;
    if (arg == "--") { ++i; break; }
    if (arg == "-h" || arg == "--help") return ParseResult::kHelp;
    if (arg.empty() || arg[0] != '-') break;  // the command starts here
    bool inline_value = split_inline(arg, &name, &value);
    if (!takes_value(name)) { *error = "unknown option '" + arg + "'"; return ParseResult::kError; }
    if (!inline_value) {
      if (i + 1 >= argc) { *error = name + " needs a value"; return ParseResult::kError; }
      value = argv[++i];
    }
    *error = apply(name, value, out);
    if (!error->empty()) return ParseResult::kError;
  }
  for (; i < argc; ++i) out->command.emplace_back(argv[i]);
  if (out->nranks == 0) *error = "-np N is required";
  else if (out->command.empty()) *error = "no command given (write it after --)";
  return error->empty() ? ParseResult::kRun : ParseResult::kError;
}

void print_usage(FILE* to) {
  std::fprintf(to,
      "usage: zcx-run -np N [--timeout S] [--grace S] [--bind-to core|none|auto]\n"
      "               [--env K=V]... [--] command [args...]\n"
      "\n"
      "Starts N ranks of `command` on this host and waits for them.\n"
      "\n"
      "  -np N, -n N     number of ranks (1..%d)\n"
      "  --timeout S     stop every rank after S seconds (exit code 124)\n"
      "  --grace S       after SIGTERM, wait S seconds before SIGKILL (default 3)\n"
      "  --bind-to B     core: rank r runs only on the r-th CPU zcx-run may use (round-robin\n"
      "                  when there are more ranks than CPUs); none: anywhere; auto (the\n"
      "                  default, as Open MPI): core when the ranks fit the CPUs, else none\n"
      "  --env K=V       set K=V for every rank (repeatable)\n"
      "  -h, --help      this text\n"
      "\n"
      "Each rank gets ZCX_RANK, ZCX_NRANKS, ZCX_LOCAL_RANK, ZCX_ROOT=127.0.0.1:<free port>,\n"
      "ZCX_SECRET=<16 random hex digits> and ZCX_RUN_JOB. Each line a rank writes to stdout\n"
      "or stderr is printed with the prefix \"[rank] \". Each rank runs in its own process\n"
      "group with stdin from /dev/null.\n"
      "\n"
      "When a rank exits non-zero or dies by a signal, or the timeout passes, zcx-run stops\n"
      "the other ranks (SIGTERM to each rank's process group, SIGKILL after the grace\n"
      "period), says which rank failed and how, and exits non-zero. SIGINT, SIGTERM and\n"
      "SIGHUP are forwarded to the ranks.\n"
      "\n"
      "Exit code: 0 when every rank exited 0; else the first failing rank's exit code, or\n"
      "128+signal when it died by a signal; 124 on timeout; 128+signal when zcx-run itself\n"
      "was interrupted; 1 for launch errors, 2 for usage errors.\n",
      kMaxRanks);
}

}  // namespace zcx::run
