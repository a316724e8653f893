// Runs out of file descriptors on purpose: lowers RLIMIT_NOFILE (this process's soft limit)
// to the lowest free descriptor number, so that the next call that needs a descriptor fails
// with EMFILE. The limit comes back with restore() or when this goes.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

namespace zcx::test {

class NoFreeFds {
 public:
  NoFreeFds() {
    if (getrlimit(RLIMIT_NOFILE, &saved_) != 0) return;
    const int lowest_free = dup(0);
    if (lowest_free < 0) return;
    close(lowest_free);
    rlimit none = saved_;
    none.rlim_cur = static_cast<rlim_t>(lowest_free);  // no descriptor number left below it
    active_ = setrlimit(RLIMIT_NOFILE, &none) == 0;
  }
  NoFreeFds(const NoFreeFds&) = delete;
  NoFreeFds& operator=(const NoFreeFds&) = delete;
  ~NoFreeFds() { restore(); }

  bool active() const { return active_; }
  // True when the limit is back (or was never lowered).
  bool restore() {
    if (active_ && setrlimit(RLIMIT_NOFILE, &saved_) != 0) return false;
    active_ = false;
    return true;
  }

 private:
  rlimit saved_{};
  bool active_ = false;
};

}  // namespace zcx::test
