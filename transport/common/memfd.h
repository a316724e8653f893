// Shared memory that two or more processes of one host map: an anonymous memfd (no name in
// /dev/shm, so a killed process leaks nothing) with its space reserved up front, and an RAII
// mapping of it. Used by the shm provider (one segment per connection) and by the
// collectives' shared lane (one segment per communicator).
#pragma once

#include "common/fd.h"
#include "common/log.h"
#include "common/status.h"

#include <cstddef>
#include <cstdint>

namespace zcx {

// RAII mapping of a segment (MAP_SHARED, pre-faulted). Unmaps on destruction; never throws.
class Mapping {
 public:
  Mapping() = default;
  ~Mapping() { reset(); }
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(addr_); }
  size_t size() const { return size_; }
  // writable false: PROT_READ only (a peer's segment that this process must not change).
  Status map(int fd, size_t size, bool writable = true);
  void reset();

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

// Creates an anonymous memfd of `bytes` with its space reserved (fallocate), so a full
// backing store is an error here (kNoMemory, naming `purpose`) rather than SIGBUS later.
// Errors are logged under `subsys`. sealed: its size is then sealed (F_SEAL_SHRINK, GROW and
// SEAL), so a process it is passed to can map it without fearing a shrink under its reads.
Status memfd_create_reserved(size_t bytes, const char* purpose, LogSubsys subsys, UniqueFd* fd,
                             bool sealed = false);
// Checks that an fd from another process is a regular file of exactly `bytes` owned by
// this user (a peer could otherwise hand over something we must not map); sealed: and that
// it can no longer shrink.
Status memfd_check(int fd, size_t bytes, LogSubsys subsys, bool sealed = false);

}  // namespace zcx
