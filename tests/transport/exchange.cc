#include "transport/exchange.h"

#include <chrono>
#include <cstring>

namespace zcx::test {

zcx_status_t ThreadGroup::barrier() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t gen = generation_;
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return ZCX_SUCCESS;
  }
  bool ok = cv_.wait_for(lock, std::chrono::seconds(300), [&] { return generation_ != gen; });
  return ok ? ZCX_SUCCESS : ZCX_ERR_TIMEOUT;
}

zcx_status_t ThreadGroup::allgather(int rank, void* data, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (slots_.size() < bytes * static_cast<size_t>(n_)) slots_.resize(bytes * n_);
    memcpy(slots_.data() + bytes * rank, static_cast<char*>(data) + bytes * rank, bytes);
  }
  zcx_status_t st = barrier();
  if (st != ZCX_SUCCESS) return st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    memcpy(data, slots_.data(), bytes * n_);
  }
  return barrier();  // nobody refills the slots before everyone has read them
}

}  // namespace zcx::test
