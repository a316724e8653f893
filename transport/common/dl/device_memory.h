// Whether a pointer is GPU memory, for the calls that take host buffers (zcx_isend/irecv,
// zcx_mem_register, collectives without a stream), which refuse one rather than fault on
// it. Usable in every build: without CUDA support nothing can be device memory.
#pragma once

#include "zcx/config.h"

namespace zcx {

#if ZCX_HAVE_CUDA
// Asked of the driver without making a context (cuda_shim.cc); false while the CUDA shim is
// not loaded, so that a host-only process never makes a CUDA call for it. Device memory:
// cudaMalloc, cuMemCreate, an IPC mapping; managed memory is not (the host may touch it).
bool cuda_is_device_memory(const void* p);
#else
inline bool cuda_is_device_memory(const void*) { return false; }
#endif

}  // namespace zcx
