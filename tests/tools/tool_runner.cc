#include "tool_runner.h"

#include "common/clock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace zcx::test {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ToolResult run_tool(const std::string& command) {
  char dir_template[] = "/tmp/zcx-tool-test-XXXXXX";
  std::string dir = ::mkdtemp(dir_template) ? dir_template : "/tmp";
  std::string out = dir + "/out", err = dir + "/err";
  std::string line = "(" + command + ") >" + out + " 2>" + err + " </dev/null";
  ToolResult result;
  int64_t start = now_ns();
  int status = std::system(line.c_str());
  result.seconds = static_cast<double>(now_ns() - start) / 1e9;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  result.out = slurp(out);
  result.err = slurp(err);
  ::unlink(out.c_str());
  ::unlink(err.c_str());
  ::rmdir(dir.c_str());
  return result;
}

int count_lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace zcx::test
