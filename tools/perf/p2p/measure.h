// The p2p measurements between rank 0 (which reports) and rank 1, perftest style:
// latency = ping-pong round trip / 2, bandwidth = bytes / time with a window of messages
// in flight, the sender's clock stopped by the receiver's final acknowledgement.
#pragma once

#include "p2p/link.h"

#include <cstddef>

namespace zcx::perf {

// Sends a byte pattern each way and checks every received byte and the reported size, so
// that a run measures transfers that really deliver the data.
Status verify_exchange(Link& link, int rank, size_t bytes);
// `iters` round trips; *one_way_us = elapsed / iters / 2 (valid on both ranks).
Status latency_rep(Link& link, int rank, size_t bytes, int iters, double* one_way_us);
// rank 0 sends `iters` messages with up to `window` in flight, rank 1 receives them with
// up to `window` receives posted, then acknowledges. *gbps (1e9 B/s) is valid on rank 0.
Status bandwidth_rep(Link& link, int rank, size_t bytes, int iters, int window, double* gbps);

}  // namespace zcx::perf
