// The stream wait of asynchronous stream-ordered collectives (core/gpu_async.cc): one
// thread, launched on the user's stream after the call's input is ready, that holds the
// stream until zcx's progress thread posts the call's ticket in pinned host memory, or until
// its bound passes. Then work queued after the call runs. The bound is what keeps a wedged
// host thread from holding the stream for ever; on expiry the kernel writes the ticket it
// gave up on to *timed_out, which the host reports.
//
// The flag is read as a volatile word of mapped host memory (every cudaMallocHost block is
// device-accessible under unified addressing); tickets wrap, so "reached" is a signed
// difference. %globaltimer is nanoseconds on every GPU since sm_70; __nanosleep keeps the
// polling thread from flooding PCIe.
#pragma once

#include <stdint.h>

extern "C" __global__ void zcx_stream_wait(const volatile uint32_t* flag, uint32_t ticket,
                                           uint64_t bound_ns, uint32_t* timed_out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (static_cast<int32_t>(*flag - ticket) < 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > bound_ns) {
      *timed_out = ticket;
      __threadfence_system();
      return;
    }
    __nanosleep(2000);
  }
}
