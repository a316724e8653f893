// zcx-perf p2p: point-to-point latency and bandwidth between two ranks over one provider.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace zcx::perf {

// args: everything after "p2p". Returns the exit code.
int p2p_main(std::vector<std::string> args);
void p2p_usage(FILE* to);

}  // namespace zcx::perf
