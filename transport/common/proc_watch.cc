// ProcessWatch.
#include "common/proc_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace zcx {

Status ProcessWatch::open(int pid) {
  pid_ = pid;
  gone_ = false;
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0 && errno == ESRCH) {
    gone_ = true;
    pidfd_.reset();
    return set_error_quiet(Status::kRemote, "process %d has already exited", pid);
  }
  if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
  pidfd_.reset(fd);
  return Status::kSuccess;
}

bool ProcessWatch::alive() const {
  if (gone_) return false;
  if (pid_ <= 0) return true;
  bool exited = false;
  if (!pidfd_.valid()) {
    exited = kill(pid_, 0) != 0 && errno == ESRCH;
  } else {
    pollfd p{pidfd_.get(), POLLIN, 0};
    exited = poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
  }
  if (exited) {
    gone_ = true;
    pidfd_.reset();
  }
  return !exited;
}

}  // namespace zcx
