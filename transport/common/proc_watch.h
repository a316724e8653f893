// Liveness of another process on this host through a pidfd (never through shared memory,
// which a dead process cannot update and a live one might corrupt).
#pragma once

#include "common/fd.h"
#include "common/status.h"

namespace zcx {

class ProcessWatch {
 public:
  // kRemote when the process has already exited. Without pidfd support (old kernels)
  // alive() falls back to kill(pid, 0).
  Status open(int pid);
  bool alive() const;  // false once the process has exited (a zombie counts as exited)
  int pid() const { return pid_; }

 private:
  UniqueFd pidfd_;
  int pid_ = -1;
};

}  // namespace zcx
