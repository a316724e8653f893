// Two-process harness for the ib provider tests: fork, exchange the listen handle through
// a pipe, connect/accept, run one role in each process. The child reports through its exit
// code (0 = pass) and stderr. Real verbs traffic needs a device: run inside
// tests/rdma-vm/run.sh (ctest -L rdma); elsewhere the tests skip.
#pragma once

#include "base/provider.h"
#include "common/config.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

extern "C" const zcx_provider_ops_t* zcx_provider_ib(void);

namespace zcx::ibtest {

struct Side {
  const zcx_provider_ops_t* ops = nullptr;
  void* ctx = nullptr;
  void* comm = nullptr;  // send comm (sender) or recv comm (receiver)
  bool sender = false;
};

// A host buffer registered with the comm (or only the middle [pad, pad+size) of it, with
// canary bytes around it when `canary` is set).
class RegBuffer {
 public:
  RegBuffer(Side& s, size_t size, size_t canary = 0);
  ~RegBuffer();
  RegBuffer(const RegBuffer&) = delete;
  RegBuffer& operator=(const RegBuffer&) = delete;
  uint8_t* data() { return base_ + canary_; }
  void* mh() { return mh_; }
  size_t size() const { return size_; }
  bool ok() const { return ok_; }
  bool canaries_intact() const;

 private:
  Side& side_;
  uint8_t* base_ = nullptr;
  size_t size_ = 0, canary_ = 0;
  void* mh_ = nullptr;
  bool ok_ = false;
};

void fill(uint8_t* p, size_t n, uint64_t seed);
// Offset of the first wrong byte, or -1.
long long verify(const uint8_t* p, size_t n, uint64_t seed);

// Polls until done; returns the status (ZCX_ERR_TIMEOUT after `seconds`).
zcx_status_t wait(Side& s, void* req, size_t* sizes, double seconds = 120);
// isend/irecv retried while they hand back NULL (bounded by `seconds`).
zcx_status_t send_blocking(Side& s, void* data, size_t size, int tag, void* mh, void** req,
                           double seconds = 60);
zcx_status_t recv_blocking(Side& s, int n, void** data, size_t* sizes, int* tags, void** mhs,
                           void** req, double seconds = 60);

// Number of ib devices here (0 outside the guest).
int device_count();

using Role = std::function<int(Side&)>;
struct PairResult {
  int parent = -1;       // the parent role's return value
  int child_status = -1; // raw waitpid status
  std::string error;     // harness failure, empty when both roles ran
  bool child_ok() const;
  std::string child_text() const;
};
// Runs `receiver` and `sender` in two processes; `child_sends` picks which one is the child.
// env: ZCX_ variables set (as config overrides) in the child only.
PairResult run_pair(const Role& receiver, const Role& sender, bool child_sends = true,
                    const std::vector<std::pair<std::string, std::string>>& child_env = {},
                    double timeout_s = 300);

}  // namespace zcx::ibtest
