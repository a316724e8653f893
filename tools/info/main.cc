// zcx-info: what this zcx build has and how it is configured.
#include "info.h"

#include <cstdio>
#include <cstring>

namespace {

void usage(FILE* to) {
  std::fprintf(to,
      "usage: zcx-info [-c] [-h]\n"
      "\n"
      "Without options: the zcx version, the optional parts this build has, and every\n"
      "built provider with its devices and their properties.\n"
      "  -c, --config   list every ZCX_ environment variable: type, default, the value in\n"
      "                 force when set, and what it does\n"
      "  -h, --help     this text\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool config = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-c") || !std::strcmp(argv[i], "--config")) {
      config = true;
    } else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "zcx-info: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  return config ? zcx::info::print_config() : zcx::info::print_build_and_providers();
}
