// Events of the simulated CUDA runtime (fake_cuda.cc): a record is work queued on its stream
// that marks the event reached; a stream's wait for an event is work that spins until the
// generation recorded before it is reached. The mutex orders what the recording stream did
// before the mark with what a waiter does after (for ThreadSanitizer too).
#include "fake_cuda.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

namespace {

struct Event {
  std::mutex mu;
  uint64_t recorded = 0, reached = 0;
};

std::atomic<long> g_events_created{0};

}  // namespace

// For tests: how many events were created in this process.
FAKE_API long fake_cuda_events_created() { return g_events_created.load(); }

FAKE_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  g_events_created++;
  *e = reinterpret_cast<cudaEvent_t>(new Event());
  return cudaSuccess;
}
FAKE_API cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<Event*>(e);
  return cudaSuccess;
}
FAKE_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  auto* ev = reinterpret_cast<Event*>(e);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(ev->mu);
    gen = ++ev->recorded;
  }
  fake_cuda_enqueue(s, [ev, gen] {
    std::lock_guard<std::mutex> lock(ev->mu);
    if (ev->reached < gen) ev->reached = gen;
  });
  return cudaSuccess;
}
FAKE_API cudaError_t cudaEventQuery(cudaEvent_t e) {
  auto* ev = reinterpret_cast<Event*>(e);
  std::lock_guard<std::mutex> lock(ev->mu);
  return ev->reached == ev->recorded ? cudaSuccess : cudaErrorNotReady;
}
FAKE_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  auto* ev = reinterpret_cast<Event*>(e);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(ev->mu);
    gen = ev->recorded;
  }
  fake_cuda_enqueue(s, [ev, gen] {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(ev->mu);
        if (ev->reached >= gen) return;
      }
      std::this_thread::yield();
    }
  });
  return cudaSuccess;
}
FAKE_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0;
  return cudaErrorNotSupported;
}
