// Random 64-bit values: for nonces, listener and connection ids and PSNs (random_u64), and
// for secrets (random_secret: the job secret of a unique id or of zcx-run's job).
#pragma once

#include "common/status.h"

#include <cstdint>

namespace zcx {

// getrandom(); the pid and the clock if that fails. Thread-safe, no state.
uint64_t random_u64();
// getrandom() or an error (kSystem, with the reason), never a weaker source; never 0 (the
// wire's "no secret").
[[nodiscard]] Status random_secret(uint64_t* out);

}  // namespace zcx
