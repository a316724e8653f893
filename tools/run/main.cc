// zcx-run: starts N local ranks of a command (see `zcx-run --help`).
#include "launcher.h"
#include "options.h"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  zcx::run::Options options;
  std::string error;
  switch (zcx::run::parse_options(argc, argv, &options, &error)) {
    case zcx::run::ParseResult::kHelp:
      zcx::run::print_usage(stdout);
      return 0;
    case zcx::run::ParseResult::kError:
      std::fprintf(stderr, "zcx-run: %s\n(see zcx-run --help)\n", error.c_str());
      return 2;
    case zcx::run::ParseResult::kRun:
      break;
  }
  zcx::run::Launcher launcher(options);
  return launcher.run();
}
