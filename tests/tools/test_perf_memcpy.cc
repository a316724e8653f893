// zcx-perf memcpy: the copy-rate reference of sweep_compare.sh. One process, small sizes;
// every destination is checked against its source by the tool itself (wrong column).
#include "tool_runner.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

namespace zcx::test {
namespace {

const std::string kPerf = ZCX_PERF_PATH;

TEST(ZcxPerfMemcpy, SweepPrintsTableAndJsonWithEveryCopyRight) {
  std::string json = testing::TempDir() + "/zcx_perf_memcpy.json";
  ToolResult r = run_tool(kPerf + " memcpy -b 8 -e 64K -f 8 -n 3 -w 1 --reps 2 --copies 3 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# copies: 3"), std::string::npos) << r.out;
  // size, copies, iters, then time_us, GBps, all_GBps (median, min, max each), then wrong = 0.
  std::regex row(R"( +(8|64|512|4096|32768) +3 +3( +[0-9]+\.[0-9]+){9} +0)");
  int rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) rows += std::regex_match(line, row);
  EXPECT_EQ(rows, 5) << r.out;
  std::string text = slurp(json);
  EXPECT_NE(text.find("\"test\": \"memcpy\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"copies\": 3"), std::string::npos) << text;
  EXPECT_EQ(count_of(text, "\"wrong\": 0}"), 5) << text;
  EXPECT_NE(text.find("{\"size\": 32768, \"copies\": 3, \"iters\": 3, \"time_us\": {\"median\": "),
            std::string::npos) << text;
}

TEST(ZcxPerfMemcpy, BadOptionsAndSizesBeyondTheHostAreRefused) {
  ToolResult zero = run_tool(kPerf + " memcpy --copies 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--copies needs a count from 1 to 1024"), std::string::npos) << zero.err;
  ToolResult unknown = run_tool(kPerf + " memcpy -t lat");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown option '-t'"), std::string::npos) << unknown.err;
  // 2 x 512 GiB per copier: refused before anything is allocated.
  ToolResult huge = run_tool(kPerf + " memcpy -b 512G -e 512G --copies 1");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_NE(huge.err.find("exceed this host's memory"), std::string::npos) << huge.err;
  ToolResult help = run_tool(kPerf + " --help");
  EXPECT_NE(help.out.find("memcpy"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace zcx::test
