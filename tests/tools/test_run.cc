// zcx-run: runs the launcher with small shell commands and checks exit codes, messages,
// output prefixes, the launch environment, and that failing jobs end promptly.
#include "tool_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace zcx::test {
namespace {

const std::string kRun = ZCX_RUN_PATH;

ToolResult zcx_run(const std::string& args, const std::string& script) {
  return run_tool(kRun + " " + args + " -- sh -c '" + script + "'");
}

TEST(ZcxRun, AllSucceedPrefixesEveryLine) {
  ToolResult r = zcx_run("-np 4", "echo out $ZCX_RANK; echo err $ZCX_RANK >&2; printf tail");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out), 8) << r.out;
  EXPECT_EQ(count_lines(r.err), 4) << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    std::string p = "[" + std::to_string(rank) + "] ";
    EXPECT_NE(r.out.find(p + "out " + std::to_string(rank) + "\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(p + "tail\n"), std::string::npos) << "partial line flushed: " << r.out;
    EXPECT_NE(r.err.find(p + "err " + std::to_string(rank) + "\n"), std::string::npos) << r.err;
  }
  std::istringstream lines(r.out + r.err);
  std::string line;
  while (std::getline(lines, line)) EXPECT_TRUE(std::regex_match(line, std::regex(R"(\[[0-3]\] .*)"))) << line;
}

TEST(ZcxRun, ManyLinesStayWhole) {
  ToolResult r = zcx_run("-np 3", "seq 5000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out), 15000);
  std::istringstream lines(r.out);
  std::string line;
  std::map<int, int> next;  // each rank's numbers arrive in order, whole
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, std::regex(R"(\[([0-2])\] ([0-9]+))"))) << line;
    int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[2]), ++next[rank]);
  }
}

TEST(ZcxRun, FailingRankStopsTheOthersPromptly) {
  ToolResult r = zcx_run("-np 4", "if [ $ZCX_RANK = 2 ]; then exit 3; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("rank 2 exited with code 3"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 10.0) << "the sleeping ranks were not stopped";
}

TEST(ZcxRun, RankKilledBySignalIsNamed) {
  ToolResult r = zcx_run("-np 2", "if [ $ZCX_RANK = 1 ]; then kill -9 $$; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_NE(r.err.find("rank 1 killed by signal 9 (Killed)"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

// Each rank prints the CPUs it may run on (the kernel's Cpus_allowed_list).
std::map<int, std::string> allowed_cpus(const ToolResult& r) {
  std::map<int, std::string> out;
  std::istringstream lines(r.out);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line))
    if (std::regex_match(line, m, std::regex(R"(\[([0-9]+)\] Cpus_allowed_list:\s*(\S+))")))
      out[std::stoi(m[1])] = m[2];
  return out;
}

const char* kShowCpus = "grep Cpus_allowed_list /proc/self/status";

TEST(ZcxRun, BindToCoreGivesEachRankItsOwnCpu) {
  ToolResult all = zcx_run("-np 1 --bind-to none", kShowCpus);
  ASSERT_EQ(all.exit_code, 0) << all.err;
  ToolResult r = zcx_run("-np 2 --bind-to core", kShowCpus);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto cpus = allowed_cpus(r);
  ASSERT_EQ(cpus.size(), 2u) << r.out;
  for (auto& [rank, list] : cpus)
    EXPECT_TRUE(std::regex_match(list, std::regex("[0-9]+"))) << "rank " << rank << ": " << list;
  if (allowed_cpus(all)[0].find_first_of(",-") != std::string::npos) {  // two CPUs or more
    EXPECT_NE(cpus[0], cpus[1]) << "both ranks bound to the same CPU";
  }
}

// zcx-run itself is confined to CPUs 0 and 1 (taskset), so 3 ranks oversubscribe them on
// any machine with two CPUs or more, however many it has.
TEST(ZcxRun, BindToNoneAndOversubscribedAutoLeaveRanksFree) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs (taskset -c 0,1)";
  const std::string two_cpus = "taskset -c 0,1 ";
  ToolResult one = run_tool(two_cpus + kRun + " -np 1 --bind-to none -- " + kShowCpus);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::string every = allowed_cpus(one)[0];
  ToolResult many = run_tool(two_cpus + kRun + " -np 3 -- " + kShowCpus);
  ASSERT_EQ(many.exit_code, 0) << many.err;
  for (auto& [rank, list] : allowed_cpus(many)) EXPECT_EQ(list, every) << "rank " << rank;
  EXPECT_NE(zcx_run("-np 1 --bind-to socket", "true").exit_code, 0);
}

TEST(ZcxRun, TimeoutStopsEveryRank) {
  ToolResult r = zcx_run("-np 3 --timeout 1", "if [ $ZCX_RANK = 1 ]; then exit 0; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.err.find("timeout after 1 s: ranks 0,2 still running"), std::string::npos) << r.err;
  EXPECT_GE(r.seconds, 0.9);
  EXPECT_LT(r.seconds, 10.0);
}

TEST(ZcxRun, RankIgnoringSigtermIsKilledAfterGrace) {
  // Rank 0 fails only once rank 1 ignores SIGTERM (a ready file says so).
  ToolResult r = zcx_run("-np 2 --grace 0.5",
                         "f=/tmp/zcx-run-test-$ZCX_RUN_JOB; "
                         "if [ $ZCX_RANK = 0 ]; then while [ ! -e $f ]; do sleep 0.05; done; "
                         "rm -f $f; exit 4; fi; trap \"\" TERM; touch $f; sleep 60");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("ranks 1 still running 0.5 s after SIGTERM; sending SIGKILL"),
            std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(ZcxRun, EnvironmentPerRank) {
  ToolResult r = zcx_run("-np 4 --env ZCX_TEST_EXTRA=hello",
                         "echo $ZCX_RANK $ZCX_NRANKS $ZCX_LOCAL_RANK $ZCX_ROOT $ZCX_SECRET "
                         "$ZCX_TEST_EXTRA");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<int> ranks;
  std::set<std::string> roots, secrets;
  std::istringstream lines(r.out);
  std::string line;
  std::regex shape(R"(\[([0-9]+)\] ([0-9]+) 4 ([0-9]+) (127\.0\.0\.1:[0-9]+) ([0-9a-f]{16}) hello)");
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, shape)) << line;
    EXPECT_EQ(m[1], m[2]) << "prefix and ZCX_RANK differ: " << line;
    EXPECT_EQ(m[2], m[3]) << "one host: local rank = rank: " << line;
    ranks.insert(std::stoi(m[2]));
    roots.insert(m[4]);
    secrets.insert(m[5]);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(roots.size(), 1u);
  EXPECT_EQ(secrets.size(), 1u);
  EXPECT_NE(*roots.begin(), "127.0.0.1:0");
}

TEST(ZcxRun, SecretDiffersBetweenJobs) {
  ToolResult a = zcx_run("-np 1", "echo $ZCX_SECRET"), b = zcx_run("-np 1", "echo $ZCX_SECRET");
  ASSERT_EQ(a.exit_code, 0);
  ASSERT_EQ(b.exit_code, 0);
  EXPECT_NE(a.out, b.out);
}

TEST(ZcxRun, MissingProgramIsReported) {
  ToolResult r = run_tool(kRun + " -np 2 -- /nonexistent/zcx-program");
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("cannot execute '/nonexistent/zcx-program'"), std::string::npos) << r.err;
}

TEST(ZcxRun, BadUsageIsRejected) {
  for (const char* args : {"-np 0 true", "-np x true", "-np 2", "--bogus -np 2 true",
                           "-np 2 --timeout -1 true", "-np 2 --env NOEQUALS true",
                           "-np 2 --env ZCX_RANK=5 true", "-np"}) {
    ToolResult r = run_tool(kRun + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("zcx-run: "), std::string::npos) << args << ": " << r.err;
  }
  ToolResult help = run_tool(kRun + " --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: zcx-run -np N"), std::string::npos);
}

TEST(ZcxRun, ForwardsSigint) {
  // The ranks say when their INT trap is set; then the launcher gets SIGINT.
  std::string dir = testing::TempDir() + "/zcx-run-sigint";
  std::string script = dir + "/job.sh";
  ASSERT_EQ(run_tool("rm -rf " + dir + " && mkdir -p " + dir).exit_code, 0);
  std::ofstream(script) << kRun << " -np 2 --env READY=" << dir << R"( -- sh -c '
      trap "echo got INT; exit 7" INT; touch $READY/$ZCX_RANK; sleep 60 & wait' &
    pid=$!
    while [ ! -e )" << dir << "/0 ] || [ ! -e " << dir << R"(/1 ]; do sleep 0.05; done
    kill -INT $pid
    wait $pid
)";
  ToolResult r = run_tool("sh " + script);
  EXPECT_EQ(r.exit_code, 128 + 2) << r.err;
  EXPECT_NE(r.out.find("[0] got INT"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("[1] got INT"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("received SIGINT; forwarding it to the ranks"), std::string::npos);
  EXPECT_LT(r.seconds, 10.0);
  (void)run_tool("rm -rf " + dir);
}

}  // namespace
}  // namespace zcx::test
