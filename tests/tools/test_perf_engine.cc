// zcx-perf's engine: statistics, size sweeps, option parsing, table and JSON output.
#include "engine/report.h"
#include "engine/stats.h"
#include "engine/sweep.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace zcx::perf {
namespace {

TEST(PerfStats, MedianMinMax) {
  Summary odd = summarize({5, 1, 3});
  EXPECT_EQ(odd.median, 3);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 5);
  Summary even = summarize({4, 1, 3, 10});
  EXPECT_EQ(even.median, 3.5);
  EXPECT_EQ(even.min, 1);
  EXPECT_EQ(even.max, 10);
  Summary one = summarize({2.5});
  EXPECT_EQ(one.median, 2.5);
  EXPECT_EQ(summarize({}).median, 0);
}

TEST(PerfSweep, SizesFollowMinMaxFactor) {
  SweepOptions o;
  o.min_bytes = 8;
  o.max_bytes = 64;
  EXPECT_EQ(sweep_sizes(o), (std::vector<size_t>{8, 16, 32, 64}));
  o.factor = 4;
  EXPECT_EQ(sweep_sizes(o), (std::vector<size_t>{8, 32}));
  o.min_bytes = o.max_bytes = 100;
  EXPECT_EQ(sweep_sizes(o), (std::vector<size_t>{100}));
  o.min_bytes = 1;
  o.max_bytes = SIZE_MAX;  // no overflow past the top
  o.factor = 2;
  EXPECT_EQ(sweep_sizes(o).size(), 64u);
}

TEST(PerfSweep, IterationsAndWarmup) {
  SweepOptions o;
  EXPECT_EQ(iterations_for(o, 8), 1000);
  EXPECT_EQ(iterations_for(o, size_t{64} << 20), 20);
  EXPECT_EQ(iterations_for(o, size_t{16} << 20), 64);
  EXPECT_EQ(warmup_for(o, 8), 100);
  EXPECT_EQ(warmup_for(o, size_t{64} << 20), 2);
  o.iters = 7;
  o.warmup = 0;
  EXPECT_EQ(iterations_for(o, 8), 7);
  EXPECT_EQ(warmup_for(o, 8), 0);
}

TEST(PerfSweep, ParsesNcclTestsSpelling) {
  std::vector<std::string> args{"-b", "1K", "--provider", "tcp", "-e", "2M", "-f", "4",
                                "-n", "10", "-w", "3", "--reps", "7", "--json", "out.json"};
  SweepOptions o;
  ASSERT_EQ(parse_sweep_options(&args, &o), "");
  EXPECT_EQ(o.min_bytes, 1024u);
  EXPECT_EQ(o.max_bytes, 2u << 20);
  EXPECT_EQ(o.factor, 4u);
  EXPECT_EQ(o.iters, 10);
  EXPECT_EQ(o.warmup, 3);
  EXPECT_EQ(o.reps, 7);
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_EQ(args, (std::vector<std::string>{"--provider", "tcp"}));  // left for the test
}

TEST(PerfSweep, RejectsBadValues) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"-b", "x"}, {"-f", "1"}, {"-n", "0"}, {"-w", "-1"},
        {"--reps", "0"}, {"-b", "2M", "-e", "1M"}, {"-e"}, {"-b", "0"}}) {
    SweepOptions o;
    EXPECT_NE(parse_sweep_options(&args, &o), "") << args[0];
  }
}

Row sample_row(bool with_bw) {
  std::optional<Summary> bw;
  if (with_bw) bw = Summary{6.5, 6.25, 7};
  return {{"size", int64_t{8}}, {"lat_us", std::optional<Summary>(Summary{3.5, 3, 4}), 2},
          {"bw_GBps", bw, 3}};
}

TEST(PerfReport, TablePrintsSummaryColumns) {
  Report report("zcx-perf", "p2p");
  report.add_meta("provider", "tcp");
  char* text = nullptr;
  size_t len = 0;
  FILE* mem = open_memstream(&text, &len);
  report.print_header(mem, sample_row(true));
  report.print_row(mem, sample_row(true));
  report.print_row(mem, sample_row(false));
  std::fclose(mem);
  std::string out(text, len);
  std::free(text);
  EXPECT_NE(out.find("# provider: tcp\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lat_us_med"), std::string::npos);
  EXPECT_NE(out.find("bw_GBps_max"), std::string::npos);
  EXPECT_NE(out.find("3.50         3.00         4.00        6.500        6.250        7.000"),
            std::string::npos) << out;
  EXPECT_NE(out.find("4.00            -            -            -"), std::string::npos) << out;
}

TEST(PerfReport, JsonHasMetaAndRows) {
  Report report("zcx-perf", "p2p");
  report.add_meta("provider", "t\"cp");
  report.add_meta("reps", int64_t{5});
  report.add_row(sample_row(true));
  report.add_row(sample_row(false));
  std::string path = testing::TempDir() + "/perf.json";
  std::string error;
  ASSERT_TRUE(report.write_json(path, &error)) << error;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string json = ss.str();
  EXPECT_NE(json.find("\"schema\": \"zcx-perf/1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"provider\": \"t\\\"cp\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"reps\": 5"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"size\": 8, \"lat_us\": {\"median\": 3.5, \"min\": 3, \"max\": 4}, "
                      "\"bw_GBps\": {\"median\": 6.5, \"min\": 6.25, \"max\": 7}}"),
            std::string::npos) << json;
  EXPECT_NE(json.find("\"bw_GBps\": null}"), std::string::npos) << json;
  EXPECT_FALSE(report.write_json("/nonexistent-dir/x.json", &error));
  EXPECT_NE(error.find("/nonexistent-dir/x.json"), std::string::npos);
}

}  // namespace
}  // namespace zcx::perf
