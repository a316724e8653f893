// The options every zcx-perf test shares (message sizes, iterations, repetitions, output),
// spelled as nccl-tests spells them, and the sweep of sizes they describe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zcx::perf {

struct SweepOptions {
  size_t min_bytes = 8;                  // -b
  size_t max_bytes = size_t{64} << 20;   // -e
  size_t factor = 2;                     // -f: multiplication factor between sizes
  int iters = 0;                         // -n: per repetition; 0 = chosen per size
  int warmup = -1;                       // -w: before the repetitions; -1 = chosen per size
  int reps = 5;                          // --reps
  std::string json_path;                 // --json FILE
};

// Consumes the shared options from args (removing them) and leaves the others for the
// test. Returns "" or a message naming the bad option.
std::string parse_sweep_options(std::vector<std::string>* args, SweepOptions* out);
// Help text for the shared options.
const char* sweep_options_help();

// A decimal integer in [lo, hi]; false on anything else.
bool parse_count(const std::string& text, long lo, long hi, long* out);
// A cheap fingerprint of the command line: every rank must run the same test.
uint64_t command_fingerprint(const std::vector<std::string>& args);

std::vector<size_t> sweep_sizes(const SweepOptions& o);
// Iterations per repetition for a message of `bytes`: -n, else enough to move ~1 GiB,
// between 20 and 1000.
int iterations_for(const SweepOptions& o, size_t bytes);
int warmup_for(const SweepOptions& o, size_t bytes);

}  // namespace zcx::perf
