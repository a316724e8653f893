// One matrix case on one rank: buffers laid out for the kind (in place or not, with guard
// bytes around every receive buffer), the call (blocking, or zcx_i* + zcx_coll_wait with a
// check of the algorithm the planner used), and the checks of the result.
#pragma once

#include "matrix/matrix_cases.h"

#include <string>
#include <vector>

namespace zcx::coll::matrix {

struct CaseEnv {
  zcx_comm_t comm = nullptr;
  int rank = 0, nranks = 1;
  Algo expected_algo = Algo::kRing;  // what the planner must have used (request forms)
  int depth = 0;                     // k of the float bound (matrix_data.h)
};

struct CaseResult {
  zcx_status_t status = ZCX_SUCCESS;  // the call's status (an error stops the group)
  std::vector<std::string> wrong;     // wrong results, guard or input damage
  double check_s = 0;                 // time spent checking (the rest: buffers and the call)
};

CaseResult run_case(const CaseEnv& env, const Case& c);

}  // namespace zcx::coll::matrix
