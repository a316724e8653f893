// Random 64-bit values for nonces, listener and connection ids and PSNs (not secrets: the
// job secret comes from the bootstrap).
#pragma once

#include <cstdint>

namespace zcx {

// getrandom(); the pid and the clock if that fails. Thread-safe, no state.
uint64_t random_u64();

}  // namespace zcx
