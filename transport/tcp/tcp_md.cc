// Memory registration: tcp reads and writes user memory directly, so a registration is only
// a token that proves the call happened (host memory only).
#include "tcp/tcp.h"

namespace zcx::tcp {

// Exposed through the ops table in tcp_provider.cc.
Status md_register(void* comm, void* data, size_t size, int kind, void** mhandle);
Status md_deregister(void* comm, void* mhandle);

namespace {
int registration_token;
}

Status md_register(void* comm, void* data, size_t size, int kind, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr || (data == nullptr && size != 0))
    return set_error(Status::kInvalidArg, kLogTcp, "tcp reg_mr: NULL argument");
  if (size > kMaxMessage)
    return set_error(Status::kInvalidArg, kLogTcp, "tcp reg_mr: size %zu is too large", size);
  if (kind != ZCX_MEM_HOST)
    return set_error(Status::kUnsupported, kLogTcp,
                     "tcp reg_mr: memory kind 0x%x unsupported (tcp moves host memory only)",
                     kind);
  *mhandle = &registration_token;
  return Status::kSuccess;
}

Status md_deregister(void* comm, void* mhandle) {
  if (comm == nullptr || mhandle != &registration_token)
    return set_error(Status::kInvalidArg, kLogTcp, "tcp dereg_mr: not a tcp registration");
  return Status::kSuccess;
}

}  // namespace zcx::tcp
