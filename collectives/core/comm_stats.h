// ZCX_STATS: what a communicator did, printed to stderr when it is destroyed or aborted —
// its operations by collective and algorithm (calls and bytes, as zcx-perf counts a call's
// size), and per peer the bytes and messages its schedules sent and received and over
// which provider: host buffers' traffic and device buffers' (stream-ordered calls, which
// may take another way: cuda_ipc, GPUDirect, staging) on rows of their own. zcx-plan
// answers "how many bytes, over which link" before a job; this answers it after. Counting
// is a few additions per operation, and off by default.
#pragma once

#include "schedule/schedule.h"
#include "select/select.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace zcx::coll {

class CommStats {
 public:
  CommStats() = default;  // counts nothing
  // Counts nothing unless ZCX_STATS is set (read once, here).
  explicit CommStats(int nranks);
  bool enabled() const { return enabled_; }
  // Inline tests, so that a communicator without ZCX_STATS pays a branch per operation.
  void count_op(CollKind kind, Algo algo, size_t bytes) {
    if (enabled_) add_op(kind, algo, bytes);
  }
  // The messages of one rank's schedule: per peer, as planned (a failed operation's count
  // says what it was to move).
  void count_schedule(const Schedule& s) {
    if (enabled_) (s.device() >= 0 ? device_traffic_ : traffic_).add(s);
  }
  // The summary; `link(peer, device)` names the way to that peer of host or device buffers
  // ("" when never connected).
  std::string report(const std::string& comm, int rank,
                     const std::function<std::string(int, bool)>& link) const;

 private:
  void add_op(CollKind kind, Algo algo, size_t bytes);
  struct Tally {
    uint64_t calls = 0, bytes = 0;
  };
  bool enabled_ = false;
  std::map<std::pair<int, int>, Tally> ops_;  // (CollKind, Algo)
  ScheduleTraffic traffic_, device_traffic_;  // sized only when enabled
};

}  // namespace zcx::coll
