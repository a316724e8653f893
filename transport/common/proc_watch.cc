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
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0 && errno == ESRCH)
    return set_error_quiet(Status::kRemote, "process %d has already exited", pid);
  if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
  pidfd_.reset(fd);
  return Status::kSuccess;
}

bool ProcessWatch::alive() const {
  if (pid_ <= 0) return true;
  if (!pidfd_.valid()) return kill(pid_, 0) == 0 || errno != ESRCH;
  pollfd p{pidfd_.get(), POLLIN, 0};
  int rc = poll(&p, 1, 0);
  return !(rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)));
}

}  // namespace zcx
