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

}  // namespace zcx
