// How the ranks of a conformance run swap provider handles: over the bootstrap (one rank per
// process, launched by zcx-run) or through shared memory (ranks as threads of one process).
#pragma once

#include <zcx/zcx.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zcx::test {

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual uint64_t secret() const = 0;
  // data holds nranks slots of `bytes`; this rank's slot is filled on entry, all on return.
  virtual zcx_status_t allgather(void* data, size_t bytes) = 0;
  virtual zcx_status_t barrier() = 0;
};

// The meeting point of N thread ranks.
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n) {}
  int size() const { return n_; }
  zcx_status_t barrier();
  zcx_status_t allgather(int rank, void* data, size_t bytes);

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<char> slots_;
};

class ThreadExchange : public Exchange {
 public:
  ThreadExchange(ThreadGroup* g, int rank) : group_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return group_->size(); }
  uint64_t secret() const override { return 0x5eed5eed5eed5eedull; }
  zcx_status_t allgather(void* data, size_t bytes) override {
    return group_->allgather(rank_, data, bytes);
  }
  zcx_status_t barrier() override { return group_->barrier(); }

 private:
  ThreadGroup* group_;
  int rank_;
};

// One rank per process from the launcher's environment (Bootstrap::init_from_env). Returns
// nullptr with *why set when this build has no bootstrap or the environment is not a job.
std::unique_ptr<Exchange> bootstrap_exchange(std::string* why);

}  // namespace zcx::test
