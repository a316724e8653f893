// One rank of a matrix group: makes its communicator(s) once, runs every case of the group
// in order, checks each result against the local reference, and reports through a pipe.
#pragma once

#include "matrix/matrix_cases.h"

#include <vector>

namespace zcx::coll::matrix {

// Report lines written to report_fd:
//   "FAIL <case>: rank R: <what>"   a wrong result (the rank goes on with the next case)
//   "ERROR <case>: rank R: <status>: <zcx_get_last_error()>"  (the rank stops: errors are sticky)
//   "DONE rank R cases C small_s S large_s L"
// Returns 0 when every case passed, 1 after wrong results, 2 after an error.
int run_group_rank(const char* provider, int rank, int nranks, const std::vector<Case>& cases,
                   int report_fd);

// Host of rank r on the emulated-hosts communicator (2 hosts, 3 from 6 ranks on).
int emulated_host(int rank, int nranks);

}  // namespace zcx::coll::matrix
