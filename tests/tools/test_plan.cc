// zcx-plan: runs the tool and checks the traffic it reports against the textbook volumes of
// each algorithm (shared/reference collectives: ring allreduce sends 2(n-1)/n of the vector
// per rank, ring allgather (n-1)/n of the total), and that every schedule of every
// collective and algorithm sends each peer exactly what that peer receives.
#include "tool_runner.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

namespace zcx::test {
namespace {

const std::string kPlan = ZCX_PLAN_PATH;

struct Row {
  size_t size = 0, count = 0;
  std::string algo;
  size_t msgs_out = 0, shm_out = 0, net_out = 0, host_out = 0, net_total = 0;
};

// The size rows of zcx-plan's table (lines not starting with '#'; the lane prints '-').
std::vector<Row> rows(const std::string& out) {
  std::vector<Row> all;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    Row r;
    std::string chunk, est, msgs, shm, net, host, total;
    f >> r.size >> r.count >> r.algo >> chunk >> est >> msgs >> shm >> net >> host >> total;
    if (msgs != "-") r.msgs_out = std::stoull(msgs), r.shm_out = std::stoull(shm),
                     r.net_out = std::stoull(net), r.host_out = std::stoull(host),
                     r.net_total = std::stoull(total);
    all.push_back(r);
  }
  return all;
}

// The one size row of `zcx-plan <args>` run with environment assignments `env`.
Row one_row(const std::string& env, const std::string& args) {
  ToolResult r = run_tool(env + " " + kPlan + " " + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out << r.err;
  std::vector<Row> all = rows(r.out);
  EXPECT_EQ(all.size(), 1u) << r.out;
  return all.empty() ? Row{} : all[0];
}

TEST(ZcxPlan, RingAllreduceSendsTwiceTheVectorLessOneShare) {
  Row ring = one_row("ZCX_ALGO=ring", "allreduce -n 4 -b 1M -e 1M --no-lane");
  EXPECT_EQ(ring.algo, "ring");
  EXPECT_EQ(ring.count, 262144u);
  EXPECT_EQ(ring.shm_out, 2 * 3 * (size_t{1} << 20) / 4);
  EXPECT_EQ(ring.net_out, 0u);
  // 8 ranks on 2 hosts: two of the ring's 8 links cross, each carrying 2 * 7/8 of 8 MiB.
  ring = one_row("ZCX_ALGO=ring", "allreduce -n 8 --hosts 2 -b 8M -e 8M");
  EXPECT_EQ(ring.net_out, 2 * 7 * (size_t{8} << 20) / 8);
  EXPECT_EQ(ring.net_total, 2 * ring.net_out);
  EXPECT_EQ(ring.host_out, ring.net_out);  // one crossing link leaves each host
  // Rabenseifner: every rank of a host crosses in the same step, through the one NIC.
  Row rhd = one_row("ZCX_ALGO=rhd", "allreduce -n 16 --hosts 2 -b 1M -e 1M");
  EXPECT_EQ(rhd.algo, "rhd");
  EXPECT_EQ(rhd.host_out, 8 * rhd.net_out);
  // --ppn 3: hosts of 3, 3 and 2 ranks, three crossing links.
  ring = one_row("ZCX_ALGO=ring", "allreduce -n 8 --ppn 3 -b 8M -e 8M");
  EXPECT_EQ(ring.net_total, 3 * ring.net_out);
}

TEST(ZcxPlan, AllgatherAndBroadcastVolumes) {
  // Allgather of 4 MiB in all over 4 ranks: each forwards the 3 blocks it does not own.
  Row ag = one_row("", "allgather -n 4 -b 4M -e 4M --no-lane");
  EXPECT_EQ(ag.algo, "ring");
  EXPECT_EQ(ag.count, (size_t{1} << 20) / 4);  // floats per rank
  EXPECT_EQ(ag.shm_out, 3 * (size_t{1} << 20));
  // A chain broadcast passes the whole vector along: the busiest rank sends it once.
  Row chain = one_row("ZCX_ALGO=chain", "broadcast -n 4 -b 1M -e 1M --no-lane -r 2");
  EXPECT_EQ(chain.algo, "chain");
  EXPECT_EQ(chain.shm_out, size_t{1} << 20);
}

TEST(ZcxPlan, OneHostSmallCallsTakeTheSharedLane) {
  EXPECT_EQ(one_row("", "allreduce -n 4 -b 8 -e 8").algo, "shared");
  EXPECT_NE(one_row("", "allreduce -n 4 -b 8 -e 8 --no-lane").algo, "shared");
  EXPECT_NE(one_row("ZCX_COLL_SHARED_LANE=0", "allreduce -n 4 -b 8 -e 8").algo, "shared");
  EXPECT_NE(one_row("", "allreduce -n 4 --hosts 2 -b 8 -e 8").algo, "shared");  // two hosts
}

// Ranks sharing CPUs (--cpus below the ranks per host, as zcx reads the members' CPU
// masks): the lane takes a host's large broadcasts and allgathers too.
TEST(ZcxPlan, OversubscribedHostsSendLargeBroadcastsThroughTheLane) {
  EXPECT_NE(one_row("", "broadcast -n 4 -b 1M -e 1M").algo, "shared");
  EXPECT_NE(one_row("", "broadcast -n 4 -b 1M -e 1M --cpus 4").algo, "shared");
  EXPECT_EQ(one_row("", "broadcast -n 4 -b 1M -e 1M --cpus 2").algo, "shared");
  EXPECT_EQ(one_row("", "allgather -n 4 -b 4M -e 4M --cpus 1").algo, "shared");
  EXPECT_NE(one_row("", "allgather -n 4 -b 4M -e 4M --cpus 1 --no-lane").algo, "shared");
  ToolResult r = run_tool(kPlan + " broadcast -n 4 -b 1M -e 1M --cpus 2 --why");
  EXPECT_NE(r.out.find("2 CPUs per host (oversubscribed)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p=4 shm oversubscribed:"), std::string::npos) << r.out;
}

// Every collective, forced onto each algorithm (those that do not apply fall back, as in a
// job), 1 to 9 ranks on 1 to 3 hosts, sizes that do not divide evenly: no pair of ranks
// disagrees on what passes between them (the tool exits 1 and prints SCHEDULE ERROR if so).
TEST(ZcxPlan, EveryScheduleSendsWhatItsPeerReceives) {
  const std::string loop =
      "fails=0; for op in allreduce broadcast reduce allgather reducescatter alltoall; do "
      "for algo in '' ring tree rhd hier direct binomial chain pairwise; do "
      "for n in 1 2 3 5 8 9; do for h in 1 2 3; do "
      "ZCX_ALGO=$algo " + kPlan + " $op -n $n --hosts $h -b 1 -e 16M -f 13 -d int8 "
      "--no-lane -r $((n - 1)) >out.txt 2>/dev/null || { fails=$((fails + 1)); "
      "echo \"$op '$algo' n=$n hosts=$h:\"; grep ERROR out.txt; }; "
      "done; done; done; done; rm -f out.txt; echo fails=$fails";
  ToolResult r = run_tool("cd \"$(mktemp -d)\" && " + loop);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fails=0\n"), std::string::npos) << r.out;
}

TEST(ZcxPlan, BadArgumentsSayWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"gossip -n 4", "unknown collective 'gossip'"},
      {"allreduce", "-n (the rank count) is required"},
      {"allreduce -n 0", "-n needs a rank count"},
      {"allreduce -n 4 --hosts 2 --ppn 2", "--hosts and --ppn do not go together"},
      {"allreduce -n 4 -d complex", "-d needs int8"},
      {"broadcast -n 4 -r 4", "root 4 is not a rank of 4"},
      {"allreduce -n 4 -b 1M -e 1K", "-b is larger than -e"},
      {"allreduce -n 4 -e", "-e needs a value"},
      {"allreduce -n 4 --cpus 0", "--cpus needs a number from 1"}};
  for (const auto& [args, says] : cases) {
    ToolResult r = run_tool(kPlan + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(says), std::string::npos) << args << ": " << r.err;
  }
  EXPECT_EQ(run_tool(kPlan + " --help").exit_code, 0);
  // From size 0 the sizes go on (0, 1, 4, 16), never stuck at 0.
  ToolResult zero = run_tool("timeout 20 " + kPlan + " allreduce -n 2 -b 0 -e 16 --no-lane");
  EXPECT_EQ(zero.exit_code, 0) << zero.err;
  EXPECT_EQ(rows(zero.out).size(), 4u) << zero.out;
}

}  // namespace
}  // namespace zcx::test
