// Runs a shell command line and captures what it printed, its exit code and its duration.
#pragma once

#include <string>

namespace zcx::test {

struct ToolResult {
  int exit_code = -1;  // 128+signal when the shell reports a signal
  std::string out, err;
  double seconds = 0;
};

// Runs `command` under /bin/sh with stdout and stderr captured separately.
ToolResult run_tool(const std::string& command);

// The whole text of a file ("" when it cannot be read).
std::string slurp(const std::string& path);
// Number of lines of `text` (each ending in '\n').
int count_lines(const std::string& text);
// Occurrences of `what` in `text` (they may overlap).
int count_of(const std::string& text, const std::string& what);

}  // namespace zcx::test
