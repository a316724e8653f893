// Monotonic time and deadlines: every wait in zcx is bounded by one of these.
#pragma once

#include <cstdint>
#include <ctime>

namespace zcx {

inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
inline int64_t now_ms() { return now_ns() / 1000000; }

class Deadline {
 public:
  static Deadline after_ms(int64_t ms) { return Deadline(now_ns() + ms * 1000000); }
  bool expired() const { return now_ns() >= at_ns_; }
  // Milliseconds left, clamped to [0, INT32_MAX] for poll().
  int remaining_ms() const {
    int64_t left = (at_ns_ - now_ns()) / 1000000;
    if (left < 0) return 0;
    return left > 0x7fffffff ? 0x7fffffff : static_cast<int>(left);
  }

 private:
  explicit Deadline(int64_t at) : at_ns_(at) {}
  int64_t at_ns_;
};

// A bound for busy-poll loops: reads the clock on every 64th check only (on an 8-byte
// round trip a clock read per poll is a visible share), and starts counting at its first
// read, at most 63 polls (microseconds) after it was made.
class PollDeadline {
 public:
  explicit PollDeadline(int64_t ms) : ns_(ms * 1000000) {}
  bool expired() {
    if (++checks_ % 64 != 0) return false;
    const int64_t now = now_ns();
    if (start_ns_ == 0) start_ns_ = now;
    return now - start_ns_ >= ns_;
  }

 private:
  int64_t ns_;
  int64_t start_ns_ = 0;
  uint32_t checks_ = 0;
};

}  // namespace zcx
