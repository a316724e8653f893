// Command line of zcx-run.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace zcx::run {

// Where ranks may run. kAuto: kCore when the ranks fit the CPUs zcx-run may use, else
// kNone — Open MPI's default (bind to core for small jobs, not when oversubscribed).
enum class Bind { kAuto, kCore, kNone };

struct Options {
  int nranks = 0;
  double timeout_s = 0;             // 0: no time limit
  double grace_s = 3;               // SIGTERM -> SIGKILL delay when stopping ranks
  Bind bind = Bind::kAuto;
  std::vector<std::string> env;     // extra K=V for every rank
  std::vector<std::string> command; // program and its arguments
};

enum class ParseResult { kRun, kHelp, kError };

// Fills *out from argv; on kError *error says what is wrong.
ParseResult parse_options(int argc, char** argv, Options* out, std::string* error);
void print_usage(FILE* to);

}  // namespace zcx::run
