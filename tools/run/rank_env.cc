#include "rank_env.h"

#include "common/fd.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
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

// Binds 127.0.0.1:0 and reports the port the kernel chose. The socket is closed again, so
// rank 0 can bind it; another process taking it in between is possible but unlikely.
bool free_loopback_port(int* port, std::string* error) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error = std::string("cannot find a free port on 127.0.0.1: ") + strerror(errno);
    return false;
  }
  *port = ntohs(addr.sin_port);
  return true;
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
