// zcx-perf: transport and collective benchmarks. One subcommand per test family:
//   p2p   point-to-point latency and bandwidth over one provider (p2p/)
//   coll  collective bandwidth in the manner of nccl-tests (coll/)
//   memcpy  the host's copy rate with every CPU copying, the limit the others are read
//         against (memcpy/)
// The shared engine (sizes, timing, statistics, table and JSON) is in engine/.
#include "coll/coll.h"
#include "memcpy/memcpy.h"
#include "p2p/p2p.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

void usage(FILE* to) {
  std::fprintf(to,
      "usage: zcx-perf <test> [options]     (zcx-perf <test> --help for its options)\n"
      "\n"
      "tests:\n"
      "  p2p    point-to-point latency (one-way = RTT/2) and bandwidth (GB/s = 1e9 B/s)\n"
      "         between two ranks over one provider\n"
      "  coll   collective time and bus bandwidth in nccl-tests' columns (allreduce,\n"
      "         broadcast, reduce, allgather, reducescatter, alltoall, sendrecv)\n"
      "  memcpy the host's copy rate with all of its CPUs copying at once (one process)\n"
      "\n"
      "Run the ranks with the zcx launcher, e.g.\n"
      "  zcx-run -np 2 -- zcx-perf p2p --provider tcp -b 8 -e 64M\n"
      "  zcx-run -np 4 -- zcx-perf coll allreduce -b 8 -e 64M -f 8\n"
      "Sizes, iterations and warm-up are spelled as in nccl-tests (-b, -e, -f, -n, -w);\n"
      "results are median, min and max over --reps repetitions; --json FILE writes them\n"
      "as JSON (docs/PERF_JSON.md).\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  if (!std::strcmp(argv[1], "p2p")) return zcx::perf::p2p_main(args);
  if (!std::strcmp(argv[1], "coll")) return zcx::perf::coll_main(args);
  if (!std::strcmp(argv[1], "memcpy")) return zcx::perf::memcpy_main(args);
  std::fprintf(stderr, "zcx-perf: unknown test '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
