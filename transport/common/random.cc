// random_u64.
#include "common/random.h"

#include "common/clock.h"
#include "common/log.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>

namespace zcx {

uint64_t random_u64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v))
    v = (static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(now_ns());
  return v;
}

Status random_secret(uint64_t* out) {
  uint64_t v = 0;
  while (v == 0) {
    ssize_t n = getrandom(&v, sizeof v, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof v))
      return set_error(Status::kSystem, kLogBootstrap, "getrandom: %s", errno_text(errno));
  }
  *out = v;
  return Status::kSuccess;
}

}  // namespace zcx
