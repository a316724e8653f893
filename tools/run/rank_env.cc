#include "rank_env.h"

#include "common/random.h"
#include "common/socket.h"
#include "common/status.h"

#include <unistd.h>

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

// A secret (common/random: getrandom, nothing weaker).
bool random_value(uint64_t* out, std::string* error) {
  if (random_secret(out) == Status::kSuccess) return true;
  *error = last_error();
  return false;
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
  if (!free_loopback_port(&port, error) || !random_value(&secret, error) ||
      !random_value(&job, error))
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
