// Copies into memory that will not be read again soon (a large receive buffer): non-temporal
// stores write the lines without first reading them into the caches, which both saves the
// read and leaves the caches to the data still in flight. Used by the shm provider's chunk
// copy-out and the collectives' bulk lane, each from a size past the caches.
#pragma once

#include <cstddef>

namespace zcx {

// memcpy of n bytes; `stream`: non-temporal stores for the 64-byte-aligned body (n >= 4 KiB).
// The stores are fenced before it returns, so a flag stored after it orders after them.
void copy_maybe_streaming(void* dst, const void* src, size_t n, bool stream);

}  // namespace zcx
