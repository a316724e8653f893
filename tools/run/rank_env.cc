#include "rank_env.h"

#include "common/socket.h"
#include "common/status.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace zcx::run {
namespace {

const char* const kLaunchNames[] = {"ZCX_RANK", "ZCX_NRANKS", "ZCX_LOCAL_RANK",
                                    "ZCX_ROOT", "ZCX_SECRET", "ZCX_RUN_JOB"};

// A free port for rank 0's bootstrap root, outside the ephemeral range (common/socket.h).
bool free_loopback_port(int* port, std::string* error) {
  if (socket_pick_loopback_port(port) == Status::kSuccess) return true;
  *error = last_error();
  return false;
}

bool random_u64(uint64_t* out, std::string* error) {
  uint8_t* p = reinterpret_cast<uint8_t*>(out);
  size_t got = 0;
  while (got < sizeof *out) {
    ssize_t n = ::getrandom(p + got, sizeof *out - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = std::string("getrandom failed: ") + strerror(errno);
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

bool is_launch_variable(const char* kv) {
  for (const char* name : kLaunchNames) {
    size_t len = std::strlen(name);
    if (std::strncmp(kv, name, len) == 0 && kv[len] == '=') return true;
  }
  return false;
}

}  // namespace

bool make_job_env(JobEnv* out, std::string* error) {
  int port = 0;
  uint64_t secret = 0, job = 0;
  if (!free_loopback_port(&port, error) || !random_u64(&secret, error) ||
      !random_u64(&job, error))
    return false;
  char text[64];
  out->root = "127.0.0.1:" + std::to_string(port);
  std::snprintf(text, sizeof text, "%016" PRIx64, secret);
  out->secret = text;
  std::snprintf(text, sizeof text, "%d-%08" PRIx32, static_cast<int>(::getpid()),
                static_cast<uint32_t>(job));
  out->job_id = text;
  return true;
}

std::vector<std::string> rank_environment(const JobEnv& job, int rank, int nranks,
                                          const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (!is_launch_variable(*e)) env.emplace_back(*e);
  for (const std::string& kv : extra) {
    std::string key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env, [&](const std::string& have) { return have.rfind(key, 0) == 0; });
    env.push_back(kv);
  }
  env.push_back("ZCX_RANK=" + std::to_string(rank));
  env.push_back("ZCX_NRANKS=" + std::to_string(nranks));
  env.push_back("ZCX_LOCAL_RANK=" + std::to_string(rank));
  env.push_back("ZCX_ROOT=" + job.root);
  env.push_back("ZCX_SECRET=" + job.secret);
  env.push_back("ZCX_RUN_JOB=" + job.job_id);
  return env;
}

}  // namespace zcx::run
