// Liveness of another process on this host through a pidfd (never through shared memory,
// which a dead process cannot update and a live one might corrupt).
#pragma once

#include "common/fd.h"
#include "common/status.h"

namespace zcx {

class ProcessWatch {
 public:
  // kRemote when the process has already exited (the watch then reads it gone). Without
  // pidfd support (old kernels) alive() falls back to kill(pid, 0).
  Status open(int pid);
  // False once the process has exited (a zombie counts as exited). Remembered: an exited
  // process never comes back, so its pid (which may be reused) is not asked again and the
  // pidfd is closed.
  bool alive() const;
  int pid() const { return pid_; }

 private:
  mutable UniqueFd pidfd_;
  mutable bool gone_ = false;
  int pid_ = -1;
};

}  // namespace zcx
