// What the simulated CUDA runtime's files share (fake_cuda.cc: memory and streams;
// fake_cuda_events.cc: events; fake_cuda_kernels.cc: zcx's module and kernels).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <functional>

#define FAKE_API extern "C" __attribute__((visibility("default")))

// Queues `fn` on stream `s` (run in order by the stream's thread; NULL: at once, here).
void fake_cuda_enqueue(cudaStream_t s, std::function<void()> fn);
