// What zcx-perf coll prints (nccl-tests' table, plus busbw min and max per placement) and
// writes with --json (schema "zcx-perf/1", test "coll"; docs/PERF_JSON.md).
#pragma once

#include "coll/measure.h"
#include "coll/options.h"

#include <cstdio>
#include <string>
#include <vector>

namespace zcx::perf {

struct CollRun {
  const CollOptions* options = nullptr;
  int nranks = 0;
  std::string device;          // "host", or "gpu: CUDA device 0 ..." (--device)
  std::string provider, algo;  // as the run was configured, for the header and meta
  std::vector<SizeResult> rows;
};

void print_table_header(FILE* to, const CollRun& run);
void print_table_row(FILE* to, const CollRun& run, const SizeResult& row);
// "# Out of bounds values" and "# Avg bus bandwidth" (mean of the median busbw of every row
// and placement), as nccl-tests ends.
void print_table_footer(FILE* to, const CollRun& run);

std::string coll_json(const CollRun& run);
// Writes coll_json(run) to path; false with *error on failure.
bool write_coll_json(const std::string& path, const CollRun& run, std::string* error);

// Total of #wrong over the rows (unchecked cells count 0).
int64_t total_wrong(const CollRun& run);

}  // namespace zcx::perf
