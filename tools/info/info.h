// The two reports of zcx-info.
#pragma once

namespace zcx::info {

// Version, build features, every built provider with its devices. Returns the exit code.
int print_build_and_providers();
// Every ZCX_ variable: type, default, current value, help.
int print_config();

}  // namespace zcx::info
