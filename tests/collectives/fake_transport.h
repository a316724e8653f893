// An in-memory transport for in-process multi-rank tests: threads are ranks, messages match
// in posting order per (sender, receiver) like a real provider, sends complete only when a
// receive takes them (rendezvous: an algorithm that relies on buffering deadlocks here, and
// the executor's timeout reports it), and a rank can be killed to test peer failures.
#pragma once

#include "base/context.h"
#include "core/comm.h"

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zcx::coll::fake {

struct FakeReq {
  std::atomic<int> state{0};  // 0 pending, 1 done, 2 failed
  Status status = Status::kSuccess;
  std::string message;
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  size_t bytes = 0;  // send: size; recv: capacity, then the size received
};

class World {
 public:
  explicit World(int n, std::vector<std::string> hosts = {});
  int nranks() const { return n_; }
  const std::string& host(int r) const { return hosts_[r]; }
  // Pending and future transfers to or from `rank` fail with kRemote.
  void kill(int rank);
  FakeReq* post_send(int src, int dst, const void* buf, size_t bytes);
  FakeReq* post_recv(int dst, int src, void* buf, size_t cap);
  size_t messages() const { return messages_.load(); }

 private:
  void match(int src, int dst);  // under mu_
  void fail(FakeReq* r, Status st, const std::string& msg);

  int n_;
  std::vector<std::string> hosts_;
  std::mutex mu_;
  std::vector<std::deque<FakeReq*>> sends_, recvs_;  // index src * n + dst
  std::vector<bool> dead_;
  std::vector<std::unique_ptr<FakeReq>> owned_;  // every request, freed with the world
  FakeReq* make_req();  // under mu_
  std::atomic<size_t> messages_{0};
};

class FakeContext;

// The context of `rank` alone, for tests that drive an executor by hand (no thread, no
// communicator); departures() returns `page`.
std::unique_ptr<Context> make_context(World& world, int rank, Departures* page = nullptr);

// Runs fn(rank, comm) on one thread per rank over `world` (communicator "world", all ranks).
void run_ranks(World& world, const std::function<void(int, Comm&)>& fn);
inline void run_ranks(int n, const std::function<void(int, Comm&)>& fn) {
  World world(n);
  run_ranks(world, fn);
}

}  // namespace zcx::coll::fake
