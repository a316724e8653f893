// Stream holds and deferred device-wide work (gpu_hold.h).
#include "common/gpu_hold.h"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

namespace zcx::gpu_hold {
namespace {

std::atomic<int> g_live{0};

struct Queue {
  std::mutex mu;
  std::vector<std::function<void()>> work;
};

Queue& queue() {
  static Queue* q = new Queue();  // never destroyed: work may be queued during static teardown
  return *q;
}

void run_queued(bool even_if_live) {
  std::vector<std::function<void()>> now;
  {
    Queue& q = queue();
    std::lock_guard<std::mutex> lock(q.mu);
    if ((live() && !even_if_live) || q.work.empty()) return;
    now.swap(q.work);
  }
  for (auto& work : now) work();  // outside the lock: it may wait for the device
}

}  // namespace

void begin() { g_live.fetch_add(1, std::memory_order_acq_rel); }
void end() { g_live.fetch_sub(1, std::memory_order_acq_rel); }
bool live() { return g_live.load(std::memory_order_acquire) > 0; }

void run_or_defer(std::function<void()> work) {
  {
    Queue& q = queue();
    std::lock_guard<std::mutex> lock(q.mu);
    if (live()) {
      q.work.push_back(std::move(work));
      return;
    }
  }
  work();  // outside the lock: it may wait for the device
}

void run_deferred() { run_queued(false); }
void run_deferred_now() { run_queued(true); }

size_t deferred() {
  Queue& q = queue();
  std::lock_guard<std::mutex> lock(q.mu);
  return q.work.size();
}

}  // namespace zcx::gpu_hold
