// zcx-perf coll <op>: collective bandwidth in the manner of nccl-tests (all_reduce_perf and
// friends), over the public collectives API (zcx/coll.h).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace zcx::perf {

// args: everything after "coll". Returns the exit code.
int coll_main(std::vector<std::string> args);
void coll_usage(FILE* to);

}  // namespace zcx::perf
