// zcx-perf p2p end to end: two ranks under zcx-run over the tcp provider, small sizes.
// (Every size is checked byte by byte by zcx-perf itself before it is timed.)
#include "tool_runner.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

namespace zcx::test {
namespace {

const std::string kRun = ZCX_RUN_PATH;
const std::string kPerf = ZCX_PERF_PATH;

#define SKIP_WITHOUT_TCP(result)                                          \
  if ((result).err.find("is not in this build") != std::string::npos) \
    GTEST_SKIP() << "this build has no tcp provider"

TEST(ZcxPerfP2p, TcpSweepPrintsTableAndJson) {
  std::string json = testing::TempDir() + "/zcx_perf_p2p.json";
  ToolResult r = run_tool(kRun + " -np 2 --timeout 100 -- " + kPerf +
                          " p2p --provider tcp -b 8 -e 2M -f 8 -n 20 -w 2 --reps 2 --json " + json);
  SKIP_WITHOUT_TCP(r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[0] #         size        iters       window   lat_us_med"),
            std::string::npos) << r.out;
  // One row per size, each with 9 numeric columns, printed by rank 0 only.
  std::regex row(R"(\[0\] +(8|64|512|4096|32768|262144|2097152) +20 +(64|16)( +[0-9]+\.[0-9]+){7})");
  int rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) rows += std::regex_match(line, row);
  EXPECT_EQ(rows, 7) << r.out;
  EXPECT_EQ(r.out.find("[1] "), std::string::npos) << "rank 1 should print nothing: " << r.out;
  std::string text = slurp(json);
  EXPECT_NE(text.find("\"schema\": \"zcx-perf/1\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"provider\": \"tcp\""), std::string::npos);
  for (const char* row_start : {"{\"size\": 8, \"iters\": 20, \"window\": 64, \"lat_us\": {",
                                "{\"size\": 32768, \"iters\": 20, \"window\": 64, \"lat_us\": {",
                                "{\"size\": 262144, \"iters\": 20, \"window\": 16, \"lat_us\": {",
                                "{\"size\": 2097152, \"iters\": 20, \"window\": 16, \"lat_us\": {"})
    EXPECT_NE(text.find(row_start), std::string::npos) << row_start << "\n" << text;
}

TEST(ZcxPerfP2p, LatencyOnlyLeavesBandwidthEmpty) {
  ToolResult r = run_tool(kRun + " -np 2 --timeout 100 -- " + kPerf +
                          " p2p -t lat -b 1K -e 1K -n 10 -w 1 --reps 1");
  SKIP_WITHOUT_TCP(r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\[0\] +1024 +10 +0( +[0-9.]+){3} +- +- +- +[0-9.]+)")))
      << r.out;
}

TEST(ZcxPerfP2p, RanksWithDifferentOptionsAreRejected) {
  ToolResult r = run_tool(kRun + " -np 2 --timeout 100 -- sh -c 'exec " + kPerf +
                          " p2p -b 8 -e 8 -n $((10 + ZCX_RANK)) --reps 1'");
  SKIP_WITHOUT_TCP(r);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("other options than rank 0"), std::string::npos) << r.err;
}

TEST(ZcxPerfP2p, NeedsTwoRanks) {
  ToolResult r = run_tool(kRun + " -np 3 --timeout 100 -- " + kPerf + " p2p -b 8 -e 8");
  SKIP_WITHOUT_TCP(r);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("p2p needs exactly 2 ranks"), std::string::npos) << r.err;
}

TEST(ZcxPerfP2p, BadOptionsAndHelp) {
  ToolResult bad = run_tool(kPerf + " p2p -t sideways");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("-t needs lat, bw or both"), std::string::npos) << bad.err;
  ToolResult unknown = run_tool(kPerf + " nosuchtest");
  EXPECT_EQ(unknown.exit_code, 2);
  ToolResult help = run_tool(kPerf + " p2p --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--provider NAME"), std::string::npos);
  EXPECT_NE(help.out.find("-b, --minbytes"), std::string::npos);
}

TEST(ZcxPerfP2p, UnknownProviderIsNamed) {
  ToolResult r = run_tool(kRun + " -np 2 --timeout 100 -- " + kPerf + " p2p --provider nope");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("provider 'nope' is not in this build"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace zcx::test
