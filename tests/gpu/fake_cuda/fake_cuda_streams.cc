// The simulated runtime's streams: each is one worker thread that runs its copies, memsets,
// kernels and event records in order; the legacy default stream (NULL) runs work at once on
// the calling thread. The calls that wait for the whole device wait for every stream.
#include "fake_cuda.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace {

// One stream: a worker thread that runs the queued work in order.
class Stream {
 public:
  Stream() : thread_([this] { run(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    work_.push_back(std::move(fn));
    cv_.notify_all();
  }
  void sync() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return work_.empty() && !busy_; });
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return work_.empty() && !busy_;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !work_.empty(); });
      if (work_.empty()) return;
      auto fn = std::move(work_.front());
      work_.pop_front();
      busy_ = true;
      lock.unlock();
      {
        DeviceAccess access;
        fn();
      }
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

// Every live stream: the calls that wait for the whole device (cudaDeviceSynchronize, and
// allocation and free, as CUDA's do) wait for each of them, so a design that holds a stream
// while it allocates deadlocks here as it would on a GPU.
// Shared: a device-wide wait keeps the streams it waits for alive, should another thread
// destroy one meanwhile (the last owner then deletes it).
std::mutex g_streams_mu;
std::vector<std::shared_ptr<Stream>> g_streams;

void sync_device() {
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    all = g_streams;
  }
  for (const auto& s : all) s->sync();
}

}  // namespace

void fake_cuda_sync_device() { sync_device(); }

// The legacy default stream (NULL) runs work at once, on the calling thread.
void fake_cuda_enqueue(cudaStream_t s, std::function<void()> fn) {
  if (s == nullptr) {
    DeviceAccess access;
    fn();
  } else reinterpret_cast<Stream*>(s)->push(std::move(fn));
}

FAKE_API cudaError_t cudaDeviceSynchronize() {
  sync_device();
  return cudaSuccess;
}
FAKE_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  if (!fake_cuda_make_current()) return cudaErrorInitializationError;
  auto stream = std::make_shared<Stream>();
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    g_streams.push_back(stream);
  }
  *s = reinterpret_cast<cudaStream_t>(stream.get());
  return cudaSuccess;
}
FAKE_API cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<Stream> stream;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    auto it = std::find_if(g_streams.begin(), g_streams.end(),
                           [&](const auto& p) { return p.get() == reinterpret_cast<Stream*>(s); });
    if (it == g_streams.end()) return cudaErrorInvalidResourceHandle;
    stream = std::move(*it);
    g_streams.erase(it);
  }
  stream->sync();
  return cudaSuccess;  // deleted here, or by a device-wide wait still holding it
}
FAKE_API cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s != nullptr) reinterpret_cast<Stream*>(s)->sync();
  return cudaSuccess;
}
