// Anonymous shared segments: creation with reserved space, checks, RAII mapping.
#include "common/memfd.h"

#include "common/check.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace zcx {

Mapping::Mapping(Mapping&& o) noexcept
    : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Status Mapping::map(int fd, size_t size, bool writable) {
  reset();
  const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = mmap(nullptr, size, prot, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    return set_error(Status::kSystem, kLogMem, "mmap of a %zu-byte shared segment failed: %s",
                     size, errno_text(errno));
  addr_ = p;
  size_ = size;
  return Status::kSuccess;
}

void Mapping::reset() {
  if (addr_ != nullptr) munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

Status memfd_create_reserved(size_t bytes, const char* purpose, LogSubsys subsys, UniqueFd* fd,
                             bool sealed) {
  const unsigned flags = MFD_CLOEXEC | (sealed ? MFD_ALLOW_SEALING : 0u);
  UniqueFd f(static_cast<int>(syscall(SYS_memfd_create, "zcx-shm", flags)));
  if (!f.valid())
    return set_error(Status::kSystem, subsys, "memfd_create failed: %s", errno_text(errno));
  ZCX_SYSCHECK(ftruncate(f.get(), static_cast<off_t>(bytes)), subsys, "ftruncate(memfd)");
  int rc;
  do {
    rc = fallocate(f.get(), 0, 0, static_cast<off_t>(bytes));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    if (err == ENOSPC || err == ENOMEM || err == EFBIG)
      return set_error(Status::kNoMemory, subsys,
                       "shared memory exhausted: /dev/shm or memfd (shmem) could not reserve "
                       "%zu bytes for %s (%s); check free memory, the memory cgroup limit "
                       "and tmpfs size", bytes, purpose, errno_text(err));
    if (err != EOPNOTSUPP)
      return set_error(Status::kSystem, subsys, "fallocate(memfd, %zu) for %s failed: %s", bytes,
                       purpose, errno_text(err));
  }
  if (sealed)
    ZCX_SYSCHECK(fcntl(f.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), subsys,
                 "fcntl(memfd, F_ADD_SEALS)");
  *fd = std::move(f);
  return Status::kSuccess;
}

Status memfd_check(int fd, size_t bytes, LogSubsys subsys, bool sealed) {
  struct stat st;
  ZCX_SYSCHECK(fstat(fd, &st), subsys, "fstat(shared segment from peer)");
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || static_cast<size_t>(st.st_size) != bytes)
    return set_error(Status::kProtocol, subsys,
                     "shared segment from peer is not a regular file of %zu bytes owned by us "
                     "(size %lld, uid %u)", bytes, static_cast<long long>(st.st_size),
                     static_cast<unsigned>(st.st_uid));
  if (!sealed) return Status::kSuccess;
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0)
    return set_error(Status::kProtocol, subsys, "shared segment from peer could still shrink "
                     "(not sealed)");
  return Status::kSuccess;
}

}  // namespace zcx
