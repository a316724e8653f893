// The environment each rank starts with.
#pragma once

#include <string>
#include <vector>

namespace zcx::run {

// What every rank of one job shares.
struct JobEnv {
  std::string root;    // 127.0.0.1:<port>
  std::string secret;  // 16 hex digits
  std::string job_id;  // <launcher pid>-<8 hex digits>
};

// Picks a free loopback port and random secret. On failure *error says why.
bool make_job_env(JobEnv* out, std::string* error);

// Our environment minus the launch variables, plus `extra` (K=V), plus this rank's
// launch variables.
std::vector<std::string> rank_environment(const JobEnv& job, int rank, int nranks,
                                          const std::vector<std::string>& extra);

}  // namespace zcx::run
