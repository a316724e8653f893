// Stream holds, and the device-wide CUDA calls that must wait until none is live.
//
// An asynchronous stream-ordered collective (collectives/core/gpu_async.h) holds the user's
// stream with a waiting kernel until its progress thread has run the operation. A CUDA call
// that waits for the whole device (as cudaFree does, and as closing an imported IPC mapping
// is reported to do: pytorch/tensorpipe#321) then waits for that kernel; made on the
// progress thread the kernel waits for, it stalls the operation until the kernel gives up
// (ZCX_GPU_STREAM_TIMEOUT). Such calls go through run_or_defer: at once while no hold is live
// in this process, else queued until run_deferred finds none live. The caller of a
// stream-ordered call runs run_deferred before it launches its own hold, with no call of its
// own in flight.
//
// No CUDA here: the counter and the queue are plain host state, built with or without CUDA.
#pragma once

#include <cstddef>
#include <functional>

namespace zcx::gpu_hold {

// A hold counts from just before its kernel is launched (begin) until its ticket is posted
// (end): from then on the kernel ends by itself, so a device-wide wait is finite.
void begin();
void end();
bool live();

// Runs `work` (a device-wide CUDA call) now when no hold is live, else queues it. Call it
// without holding a lock that a progress thread may need: the work may wait for the device.
void run_or_defer(std::function<void()> work);
// Runs the queued work when no hold is live; leaves it queued otherwise.
void run_deferred();
// Runs the queued work at once, live holds or not: for a caller that cannot go on without it
// and accepts the wait.
void run_deferred_now();
// Queued work not yet run.
size_t deferred();

}  // namespace zcx::gpu_hold
