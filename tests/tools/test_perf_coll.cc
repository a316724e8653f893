// zcx-perf coll end to end: 2 and 3 ranks under zcx-run (shm between local ranks, or
// whatever ZCX_PROVIDERS selects), small sizes, every result checked (#wrong) by zcx-perf
// itself, and the JSON rows the compare scripts read.
#include "tool_runner.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

namespace zcx::test {
namespace {

const std::string kRun = ZCX_RUN_PATH;
const std::string kPerf = ZCX_PERF_PATH;

// Table rows of rank 0 whose both #wrong cells are 0 (5 numbers, then #wrong, per placement;
// a time from 10 ms up prints without decimals, as in nccl-tests).
int clean_rows(const std::string& out, const std::string& type, const std::string& redop,
               int root) {
  std::regex row(R"(\[0\] +[0-9]+ +[0-9]+ +)" + type + " +" + redop + " +" +
                 std::to_string(root) +
                 R"(( +[0-9]+(\.[0-9]+)?){5} +0( +[0-9]+(\.[0-9]+)?){5} +(0|N/A))");
  int rows = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) rows += std::regex_match(line, row);
  return rows;
}

struct Case {
  int np;
  std::string op, flags, type, redop;
  int root;
};

// Runs one case over sizes 8 B .. 256 KiB (6 sizes) and checks table and JSON.
void run_case(const Case& c) {
  std::string json = testing::TempDir() + "/zcx_perf_coll_" + c.op + std::to_string(c.np) + ".json";
  ToolResult r = run_tool(kRun + " -np " + std::to_string(c.np) + " --timeout 60 -- " + kPerf +
                          " coll " + c.op + " -b 8 -e 256K -f 8 -n 3 -w 1 --reps 2 -c 1 " +
                          c.flags + " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(clean_rows(r.out, c.type, c.redop, c.root), 6) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Avg bus bandwidth    : "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[1] "), std::string::npos) << "only rank 0 prints: " << r.out;
  std::string text = slurp(json);
  EXPECT_NE(text.find("\"schema\": \"zcx-perf/1\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"test\": \"coll\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"op\": \"" + c.op + "\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"ranks\": " + std::to_string(c.np)), std::string::npos) << text;
  EXPECT_EQ(count_of(text, "{\"size\": "), 6) << text;
  EXPECT_EQ(count_of(text, "\"out_of_place\": {\"time_us\": {\"median\": "), 6) << text;
  EXPECT_EQ(count_of(text, "\"in_place\": {\"time_us\": {\"median\": "), 6) << text;
  EXPECT_EQ(count_of(text, "\"wrong\": 0}"), 12) << text;
  EXPECT_NE(text.find("{\"size\": 26214"), std::string::npos) << "largest row: " << text;
}

TEST(ZcxPerfColl, AllreduceTwoAndThreeRanks) {
  run_case({2, "allreduce", "", "float", "sum", -1});
  run_case({3, "allreduce", "", "float", "sum", -1});
}

// Waits yield at once only when a host runs more members than CPUs among them (the union of
// the members' affinities: zcx-run binds each rank to one CPU, so a rank's own mask is not
// the answer). ZCX_DEBUG_SUBSYS=TUNING says what each communicator found.
TEST(ZcxPerfColl, OversubscriptionComesFromTheMembersCpus) {
  const std::string log = "ZCX_DEBUG=INFO ZCX_DEBUG_SUBSYS=TUNING ";
  const std::string job = " --timeout 60 -- " + kPerf + " coll allreduce -b 8 -e 8 -n 2 -w 1 --reps 1";
  ToolResult bound = run_tool(log + kRun + " -np 2 --bind-to core" + job);
  ASSERT_EQ(bound.exit_code, 0) << bound.out << bound.err;
  const std::string all = bound.out + bound.err;
  if (all.find("2 members on this host, 1 CPUs") != std::string::npos)
    GTEST_SKIP() << "this machine lets zcx-run use one CPU only";
  EXPECT_NE(all.find("2 members on this host, 2 CPUs among them\n"), std::string::npos) << all;
  EXPECT_EQ(all.find("oversubscribed"), std::string::npos) << all;
  ToolResult one_cpu = run_tool(log + "taskset -c 0 " + kRun + " -np 2" + job);
  ASSERT_EQ(one_cpu.exit_code, 0) << one_cpu.out << one_cpu.err;
  EXPECT_NE((one_cpu.out + one_cpu.err).find("2 members on this host, 1 CPUs among them: "
                                             "oversubscribed"), std::string::npos)
      << one_cpu.out << one_cpu.err;
}

TEST(ZcxPerfColl, AllgatherAndBroadcastFromRankOne) {
  run_case({3, "allgather", "", "float", "none", -1});
  run_case({2, "broadcast", "-r 1", "float", "none", 1});
  run_case({3, "broadcast", "-r 1", "float", "none", 1});
}

// The other ops, dtypes and reductions, one run each (the check covers every element).
TEST(ZcxPerfColl, OtherOpsTypesAndReductions) {
  run_case({3, "reduce", "-r 2 -d int8 -o max", "int8", "max", 2});
  run_case({3, "reducescatter", "-d half -o prod", "half", "prod", -1});
  run_case({3, "allreduce", "-d bfloat16 -o avg", "bfloat16", "avg", -1});
  run_case({3, "allreduce", "-d int64 -o min", "int64", "min", -1});
  run_case({3, "alltoall", "-d uint32", "uint32", "none", -1});
}

TEST(ZcxPerfColl, SendrecvInPlaceIsNotChecked) {
  ToolResult r = run_tool(kRun + " -np 3 --timeout 60 -- " + kPerf +
                          " coll sendrecv -b 8 -e 4K -f 8 -n 3 -w 1 --reps 1 -d double");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(clean_rows(r.out, "double", "none", -1), 4) << r.out;
  EXPECT_NE(r.out.find("N/A"), std::string::npos) << r.out;
}

// ZCX_STATS: at destroy every rank prints its operations and per-peer traffic. A ring
// allreduce of 3 x 256 KiB over 3 ranks sends 2 * 2/3 of the vector to the next rank and
// receives as much from the previous one, per call, over tcp.
TEST(ZcxPerfColl, StatsCountOperationsAndPerPeerTraffic) {
  const size_t kBytes = 3 * 262144, kPerCall = 2 * 2 * kBytes / 3;
  ToolResult r = run_tool("ZCX_STATS=1 ZCX_ALGO=allreduce:ring ZCX_COLL_SHARED_LANE=0 " + kRun +
                          " -np 3 --timeout 60 -- " + kPerf + " coll allreduce -b " +
                          std::to_string(kBytes) + " -e " + std::to_string(kBytes) +
                          " -n 2 -w 1 --reps 1 -c 0 --provider tcp");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string all = r.out + r.err;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string me = R"(\[)" + std::to_string(rank) + R"(\] \[zcx stats\])";
    std::smatch m;
    // 6 calls of kBytes (warm-up and timed, out of and in place), and zcx-perf's own few
    // small set-up allreduces.
    ASSERT_TRUE(std::regex_search(all, m, std::regex(me + R"( +allreduce +ring +[0-9]+ calls +([0-9]+) bytes)")))
        << all;
    EXPECT_GE(std::stoull(m[1]), 6 * kBytes);
    EXPECT_LT(std::stoull(m[1]), 6 * kBytes + 4096);
    // Sent to the next rank and received from the previous one: the ring's bytes (plus the
    // set-up calls' few).
    for (const auto& [peer, column] : {std::pair{(rank + 1) % 3, 1}, std::pair{(rank + 2) % 3, 2}}) {
      const std::regex row(me + " +" + std::to_string(peer) + R"( tcp +([0-9]+) +[0-9]+ +([0-9]+) +[0-9]+)");
      ASSERT_TRUE(std::regex_search(all, m, row)) << all;
      EXPECT_GE(std::stoull(m[column]), 6 * kPerCall) << "rank " << rank << " peer " << peer;
      EXPECT_LT(std::stoull(m[column]), 6 * kPerCall + 4096) << "rank " << rank << " peer " << peer;
    }
  }
}

TEST(ZcxPerfColl, BadOptionsAndHelp) {
  ToolResult help = run_tool(kPerf + " coll --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("-o, --op OP"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--provider NAMES"), std::string::npos) << help.out;
  ToolResult op = run_tool(kPerf + " coll allsorts");
  EXPECT_EQ(op.exit_code, 2);
  EXPECT_NE(op.err.find("unknown collective 'allsorts'"), std::string::npos) << op.err;
  ToolResult type = run_tool(kPerf + " coll allreduce -d float128");
  EXPECT_EQ(type.exit_code, 2);
  EXPECT_NE(type.err.find("-d needs int8"), std::string::npos) << type.err;
  ToolResult root = run_tool(kRun + " -np 2 --timeout 60 -- " + kPerf + " coll reduce -r 2");
  EXPECT_NE(root.exit_code, 0);
  EXPECT_NE(root.err.find("-r 2 is not a rank of this 2-rank job"), std::string::npos) << root.err;
}

// --overlap: the request form measured as the OSU benchmarks do, five more columns per row
// (pure and total time, overlap median, min, max) and an "overlap" object per JSON row.
// With polling every 5 us and without: the figures are the host's; here only their shape
// and bounds (0..100 %, total at least the computation) are checked.
TEST(ZcxPerfColl, OverlapOfThePostedForm) {
  for (const char* poll : {"0", "5"}) {
    std::string json = testing::TempDir() + "/zcx_perf_coll_overlap" + poll + ".json";
    ToolResult r = run_tool(kRun + " -np 2 --timeout 60 -- " + kPerf +
                            " coll allgather -b 64 -e 256K -f 8 -n 3 -w 1 --reps 2 --overlap " +
                            poll + " --json " + json);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::regex row(R"(\[0\] +[0-9]+ .* +0( +[0-9]+(\.[0-9]+)?){5} +0 +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+))");
    int rows = 0;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (!std::regex_match(line, m, row)) continue;
      ++rows;
      EXPECT_GE(std::stod(m[4]), std::stod(m[3])) << "total >= computation (= pure): " << line;
      for (int k : {5, 6, 7}) EXPECT_LE(std::stod(m[k]), 100.0) << line;
      EXPECT_LE(std::stod(m[6]), std::stod(m[5])) << line;
    }
    EXPECT_EQ(rows, 5) << r.out;
    EXPECT_NE(r.out.find(std::string("zcx_coll_test every ") + poll + " us"), std::string::npos) << r.out;
    EXPECT_EQ(count_of(slurp(json), "\"overlap\": {\"poll_us\": " + std::string(poll) +
                                        ", \"compute_us\": "), 5) << slurp(json);
  }
  for (const char* bad : {"coll sendrecv --overlap 5", "coll allreduce --overlap 5 --device gpu",
                          "coll allreduce --overlap -1"}) {
    ToolResult r = run_tool(kPerf + " " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--overlap"), std::string::npos) << r.err;
  }
}

// nccl-tests' spellings (its binaries are all_reduce_perf, reduce_scatter_perf, ...) name the
// same collectives; the table and the JSON use zcx's names.
TEST(ZcxPerfColl, NcclTestsNamesAreAccepted) {
  for (const auto& [spelled, name] : {std::pair{"reduce_scatter", "reducescatter"},
                                      {"all_gather", "allgather"}, {"all_reduce", "allreduce"}}) {
    ToolResult r = run_tool(kRun + " -np 2 --timeout 60 -- " + kPerf + " coll " + spelled +
                            " -b 64 -e 64 -n 2 -w 1 --reps 1");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(std::string("# zcx-perf coll ") + name + ": nranks 2"), std::string::npos)
        << r.out;
  }
}

// No CUDA driver (forced: a library name that does not exist): every rank says why, at once.
TEST(ZcxPerfColl, DeviceGpuWithoutADriverFailsClearly) {
  ToolResult r = run_tool("ZCX_CUDA_DRIVER_LIBRARY=libcuda-absent.so.1 " + kRun +
                          " -np 2 --timeout 60 -- " + kPerf + " coll allreduce --device gpu");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--device gpu"), std::string::npos) << r.out << r.err;
  ToolResult bad = run_tool(kPerf + " coll allreduce --device tpu");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

#ifdef ZCX_FAKE_CUDA_PATH
// The environment that loads the simulated runtime in place of libcuda and libcudart.
const std::string kSimulatedCuda = std::string("ZCX_CUDA_DRIVER_LIBRARY=") + ZCX_FAKE_CUDA_PATH +
                                   " ZCX_CUDA_RUNTIME_LIBRARY=" + ZCX_FAKE_CUDA_PATH + " ";

// --device gpu through the simulated CUDA runtime (host memory; tests/gpu/fake_cuda), staged
// transfers: the tool's device buffers, stream calls and checks, not a GPU.
TEST(ZcxPerfColl, DeviceGpuOnTheSimulatedRuntime) {
  ToolResult r = run_tool(kSimulatedCuda + "ZCX_PROVIDERS=shm,tcp ZCX_GPU_STAGING=1 " + kRun +
                          " -np 2 --timeout 60 -- " + kPerf +
                          " coll allreduce --device gpu -b 8 -e 256K -f 8 -n 3 -w 1 --reps 2 -c 1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(clean_rows(r.out, "float", "sum", -1), 6) << r.out;
  EXPECT_NE(r.out.find("device: gpu: CUDA device 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ZCX_GPU_STAGING=1"), std::string::npos) << r.out;
}

// sendrecv on device buffers (stream-ordered send/recv in a group), over cuda_ipc as the
// simulator has it: each rank's received block checked.
TEST(ZcxPerfColl, DeviceGpuSendrecvOnTheSimulatedRuntime) {
  ToolResult r = run_tool(kSimulatedCuda + kRun + " -np 2 --timeout 60 -- " + kPerf +
                          " coll sendrecv --device gpu -b 8 -e 256K -f 8 -n 3 -w 1 --reps 2 -c 1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(clean_rows(r.out, "float", "none", -1), 6) << r.out;
  EXPECT_NE(r.out.find("device: gpu: CUDA device 0"), std::string::npos) << r.out;
}
#endif

TEST(ZcxPerfColl, RanksWithDifferentOptionsAreRejected) {
  ToolResult r = run_tool(kRun + " -np 2 --timeout 60 -- sh -c 'exec " + kPerf +
                          " coll allreduce -b 8 -e 8 -n $((3 + ZCX_RANK)) --reps 1'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the ranks got different options"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace zcx::test
