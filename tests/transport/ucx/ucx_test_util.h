// Two-process harness for the ucx provider tests: fork, pass the listen handle through a
// pipe, connect/accept with deadlines. The child reports through its exit status only (no
// gtest calls after fork), so a failing child shows up as a failing parent assertion.
#pragma once

#include "base/provider.h"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

extern "C" const zcx_provider_ops_t* zcx_provider_ucx(void);

namespace zcx::ucx_test {

inline constexpr uint64_t kSecret = 0x5eed5eed1234abcdull;

struct Endpoint {
  const zcx_provider_ops_t* ops = nullptr;
  void* ctx = nullptr;
  void* listen = nullptr;
  void* comm = nullptr;  // send comm in the child, recv comm in the parent
  std::string error;     // last failure, for messages
};

// Opens the provider as `rank`; false (with ep->error) when UCX is unusable here.
bool open_provider(Endpoint* ep, int rank, uint64_t secret);
void close_provider(Endpoint* ep);
bool accept_within(Endpoint* ep, int timeout_ms);
bool connect_within(Endpoint* ep, const void* handle, int timeout_ms);
// isend, retried while the provider answers "retry later" (NULL request). Returns the
// zcx status; *request is set on success.
int isend_retry(Endpoint* ep, void* buf, size_t n, int tag, void* mh, void** request);
// Tests until done or error; returns the zcx status; sizes gets the received sizes.
int test_until_done(Endpoint* ep, void* request, size_t* sizes, int timeout_ms);
void fill_pattern(void* buf, size_t n, uint32_t seed);
bool check_pattern(const void* buf, size_t n, uint32_t seed);

// Runs `child(handle)` in a forked child after the parent listened (parent rank 0, child
// rank 1). The parent then accepts and runs `parent(ep, child_pid)`. Returns the child's
// exit status (as from waitpid) through *child_status, -1 when it had to be killed.
// child_ucx_tls, when set, is the child's UCX_TLS (the parent keeps the test's).
struct ForkResult {
  bool parent_ok = false;
  int child_status = -1;
  std::string error;
};
ForkResult run_pair(const std::function<bool(Endpoint&, pid_t)>& parent,
                    const std::function<int(Endpoint&)>& child, uint64_t child_secret = kSecret,
                    int timeout_ms = 30000, const char* child_ucx_tls = nullptr);

// The same with the roles reversed: the child (rank 1) listens, accepts and runs `child`
// (the receiver); the parent (rank 0) connects and runs `parent` (the sender).
ForkResult run_pair_reversed(const std::function<bool(Endpoint&, pid_t)>& parent,
                             const std::function<int(Endpoint&)>& child, int timeout_ms = 30000);

// How long the child's connect took (set in the child before its function runs).
extern int64_t child_connect_ms;

// true when UCX loads and has a device here (tests skip otherwise).
bool ucx_available(std::string* why);

}  // namespace zcx::ucx_test
