// zcx-perf memcpy: how fast this host's CPUs copy memory, all of them at once. The reference
// ("memcpy limit") the collective and p2p figures of ranks on one host are read against.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace zcx::perf {

// args: everything after "memcpy". Returns the exit code.
int memcpy_main(std::vector<std::string> args);
void memcpy_usage(FILE* to);

}  // namespace zcx::perf
