// ZCX_STATS: what a communicator did, printed to stderr when it is destroyed or aborted —
// its operations by collective and algorithm (calls and bytes, as zcx-perf counts a call's
// size), and per peer the bytes and messages its schedules sent and received and over
// which provider: host buffers' traffic and device buffers' (stream-ordered calls, which
// may take another way: cuda_ipc, GPUDirect, staging) on rows of their own. zcx-plan
// answers "how many bytes, over which link" before a job; this answers it after. For host
// buffers it also answers "did it overlap compute": each operation's time in flight (post
// to completion), and how much of that the caller spent outside zcx's calls on this
// communicator (posting, testing, waiting): time it had for its own work while the
// operation moved. A blocking call overlaps nothing. Counting is a few additions and a few
// clock reads per call, and off by default.
#pragma once

#include "common/clock.h"
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
  // A stretch the caller spends inside a call that drives this communicator; nested ones
  // count once.
  class Inside {
   public:
    explicit Inside(CommStats& s) : s_(s.enabled_ ? &s : nullptr) {
      if (s_ && s_->depth_++ == 0) s_->inside_since_ns_ = now_ns();
    }
    ~Inside() {
      if (s_ && --s_->depth_ == 0) s_->inside_ns_ += now_ns() - s_->inside_since_ns_;
    }
    Inside(const Inside&) = delete;
    Inside& operator=(const Inside&) = delete;

   private:
    CommStats* s_;
  };
  // When a host operation was posted (at_ns 0: not timed).
  struct Posted {
    int64_t at_ns = 0, inside_ns = 0;
  };
  Posted posted() const { return enabled_ ? posted_now() : Posted{}; }
  // A posted operation of (kind, algo) finished: its time in flight, and its overlap.
  void finished(CollKind kind, Algo algo, const Posted& p) {
    if (enabled_ && p.at_ns != 0) add_time(kind, algo, p);
  }
  // The summary; `link(peer, device)` names the way to that peer of host or device buffers
  // ("" when never connected).
  std::string report(const std::string& comm, int rank,
                     const std::function<std::string(int, bool)>& link) const;

 private:
  void add_op(CollKind kind, Algo algo, size_t bytes);
  Posted posted_now() const;
  void add_time(CollKind kind, Algo algo, const Posted& p);
  struct Tally {
    uint64_t calls = 0, bytes = 0;
    uint64_t timed = 0;  // operations with a time (host buffers, finished)
    int64_t flight_ns = 0, inside_ns = 0;
  };
  bool enabled_ = false;
  int depth_ = 0;
  int64_t inside_since_ns_ = 0;
  int64_t inside_ns_ = 0;  // time inside calls, in all (Inside)
  std::map<std::pair<int, int>, Tally> ops_;  // (CollKind, Algo)
  ScheduleTraffic traffic_, device_traffic_;  // sized only when enabled
};

}  // namespace zcx::coll
