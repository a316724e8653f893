// Segments (memfd), their geometry, and peer liveness.
#include "common/check.h"
#include "shm/shm.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace zcx::shm {
namespace {

bool pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }
size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

Status layout_make(uint32_t nslots, uint32_t slot_bytes, uint32_t nchunks,
                   uint32_t chunk_bytes, Layout* out) {
  if (!pow2(nslots) || nslots > 4096 || slot_bytes < 128 || slot_bytes > (1u << 20) ||
      slot_bytes % 64 != 0 || !pow2(nchunks) || nchunks > 64 || chunk_bytes < 4096 ||
      chunk_bytes > (64u << 20) || chunk_bytes % 4096 != 0)
    return set_error(Status::kInvalidArg, kLogShm,
                     "shm ring geometry out of range: %u slots of %u bytes, %u chunks of %u "
                     "bytes (check ZCX_SHM_SLOTS/SLOT_BYTES/CHUNKS/CHUNK_BYTES)",
                     nslots, slot_bytes, nchunks, chunk_bytes);
  Layout l;
  l.nslots = nslots;
  l.slot_bytes = slot_bytes;
  l.nchunks = nchunks;
  l.chunk_bytes = chunk_bytes;
  l.sender_off = sizeof(SegHeader);
  l.receiver_off = l.sender_off + sizeof(SenderLine);
  l.slots_off = l.receiver_off + sizeof(ReceiverLine);
  l.chunks_off = round_up(l.slots_off + size_t(nslots) * slot_bytes, 4096);
  l.total = l.chunks_off + size_t(nchunks) * chunk_bytes;
  *out = l;
  return Status::kSuccess;
}

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

Status Mapping::map(int fd, size_t size) {
  reset();
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    return set_error(Status::kSystem, kLogShm, "mmap of a %zu-byte shm segment failed: %s",
                     size, strerror(errno));
  addr_ = p;
  size_ = size;
  return Status::kSuccess;
}

void Mapping::reset() {
  if (addr_ != nullptr) munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

Status segment_create(size_t bytes, UniqueFd* fd) {
  UniqueFd f(static_cast<int>(syscall(SYS_memfd_create, "zcx-shm", MFD_CLOEXEC)));
  if (!f.valid())
    return set_error(Status::kSystem, kLogShm, "memfd_create failed: %s", strerror(errno));
  ZCX_SYSCHECK(ftruncate(f.get(), static_cast<off_t>(bytes)), kLogShm, "ftruncate(memfd)");
  int rc;
  do {
    rc = fallocate(f.get(), 0, 0, static_cast<off_t>(bytes));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    if (err == ENOSPC || err == ENOMEM || err == EFBIG)
      return set_error(Status::kNoMemory, kLogShm,
                       "shared memory exhausted: /dev/shm or memfd (shmem) could not reserve "
                       "%zu bytes for an shm connection (%s); check free memory, the memory "
                       "cgroup limit and tmpfs size, or use fewer/smaller rings",
                       bytes, strerror(err));
    if (err != EOPNOTSUPP)
      return set_error(Status::kSystem, kLogShm, "fallocate(memfd, %zu) failed: %s", bytes,
                       strerror(err));
  }
  *fd = std::move(f);
  return Status::kSuccess;
}

Status segment_check(int fd, size_t bytes) {
  struct stat st;
  ZCX_SYSCHECK(fstat(fd, &st), kLogShm, "fstat(shm segment from peer)");
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || static_cast<size_t>(st.st_size) != bytes)
    return set_error(Status::kProtocol, kLogShm,
                     "shm segment from peer is not a regular file of %zu bytes owned by us "
                     "(size %lld, uid %u)", bytes, static_cast<long long>(st.st_size),
                     static_cast<unsigned>(st.st_uid));
  return Status::kSuccess;
}

Status host_boot_id(uint8_t out[16]) {
  memset(out, 0, 16);
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f == nullptr)
    return set_error(Status::kSystem, kLogShm, "cannot read /proc/sys/kernel/random/boot_id: %s",
                     strerror(errno));
  char text[64] = {};
  bool ok = fgets(text, sizeof(text), f) != nullptr;
  fclose(f);
  int n = 0;
  for (const char* p = text; ok && *p != '\0' && n < 32; ++p) {
    int v = (*p >= '0' && *p <= '9') ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10 : -1;
    if (v < 0) continue;
    out[n / 2] = static_cast<uint8_t>(out[n / 2] | (v << ((n % 2) ? 0 : 4)));
    ++n;
  }
  if (n != 32)
    return set_error(Status::kSystem, kLogShm, "unexpected boot_id format: '%s'", text);
  return Status::kSuccess;
}

}  // namespace zcx::shm
