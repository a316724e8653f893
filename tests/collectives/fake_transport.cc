// The in-memory transport.
#include "fake_transport.h"

#include "common/clock.h"
#include "common/config_vars.h"

#include <cstring>
#include <thread>

namespace zcx::coll::fake {

World::World(int n, std::vector<std::string> hosts)
    : n_(n), hosts_(std::move(hosts)), sends_(n * n), recvs_(n * n), dead_(n, false) {
  if (hosts_.empty()) hosts_.assign(n, "fakehost");
}

void World::fail(FakeReq* r, Status st, const std::string& msg) {
  r->status = st;
  r->message = msg;
  r->state.store(2);
}

void World::match(int src, int dst) {
  auto& sq = sends_[src * n_ + dst];
  auto& rq = recvs_[src * n_ + dst];
  while (!sq.empty() && !rq.empty()) {
    FakeReq* s = sq.front();
    FakeReq* r = rq.front();
    sq.pop_front();
    rq.pop_front();
    if (s->bytes > r->bytes) {
      std::string msg = "message of " + std::to_string(s->bytes) + " bytes from rank " +
                        std::to_string(src) + " into a receive of " + std::to_string(r->bytes);
      fail(s, Status::kInvalidUsage, msg);
      fail(r, Status::kInvalidUsage, msg);
      continue;
    }
    if (s->bytes) std::memcpy(r->rbuf, s->sbuf, s->bytes);
    r->bytes = s->bytes;
    messages_.fetch_add(1);
    s->state.store(1);
    r->state.store(1);
  }
}

void World::kill(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  dead_[rank] = true;
  std::string msg = "rank " + std::to_string(rank) + " (" + hosts_[rank] + ") died";
  for (int p = 0; p < n_; ++p)
    for (int idx : {rank * n_ + p, p * n_ + rank}) {
      for (FakeReq* r : sends_[idx]) fail(r, Status::kRemote, msg);
      for (FakeReq* r : recvs_[idx]) fail(r, Status::kRemote, msg);
      sends_[idx].clear();
      recvs_[idx].clear();
    }
}

FakeReq* World::make_req() {
  owned_.push_back(std::make_unique<FakeReq>());
  return owned_.back().get();
}

FakeReq* World::post_send(int src, int dst, const void* buf, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  FakeReq* r = make_req();
  r->sbuf = buf;
  r->bytes = bytes;
  if (dead_[src] || dead_[dst]) {
    fail(r, Status::kRemote, "rank " + std::to_string(dead_[dst] ? dst : src) + " died");
    return r;
  }
  sends_[src * n_ + dst].push_back(r);
  match(src, dst);
  return r;
}

FakeReq* World::post_recv(int dst, int src, void* buf, size_t cap) {
  std::lock_guard<std::mutex> lock(mu_);
  FakeReq* r = make_req();
  r->rbuf = buf;
  r->bytes = cap;
  if (dead_[src] || dead_[dst]) {
    fail(r, Status::kRemote, "rank " + std::to_string(dead_[src] ? src : dst) + " died");
    return r;
  }
  recvs_[src * n_ + dst].push_back(r);
  match(src, dst);
  return r;
}

namespace {

class FakeBootstrap final : public Bootstrap {
 public:
  FakeBootstrap(World* w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return w_->nranks(); }
  uint64_t secret() const override { return 0x5eed; }
  const std::string& host(int r) const override { return w_->host(r); }
  int pid(int) const override { return 0; }
  Status allgather(void*, size_t) override { return Status::kUnsupported; }
  Status barrier() override { return Status::kUnsupported; }
  Status send(int, int, const void*, size_t) override { return Status::kUnsupported; }
  Status recv(int, int, void*, size_t) override { return Status::kUnsupported; }
  void abort() override {}

 private:
  World* w_;
  int rank_;
};

class FakeEndpoint final : public Endpoint {
 public:
  FakeEndpoint(World* w, int me, int peer) : w_(w), me_(me), peer_(peer) {}
  int peer() const override { return peer_; }
  const zcx_provider_ops_t* provider() const override { return nullptr; }
  Status isend(const void* buf, size_t size, int, Request** req) override {
    *req = reinterpret_cast<Request*>(w_->post_send(me_, peer_, buf, size));
    return Status::kSuccess;
  }
  Status irecv(void* buf, size_t size, int, Request** req) override {
    *req = reinterpret_cast<Request*>(w_->post_recv(me_, peer_, buf, size));
    return Status::kSuccess;
  }

 private:
  World* w_;
  int me_, peer_;
};

}  // namespace

class FakeContext final : public Context {
 public:
  FakeContext(World* w, int rank, Departures* page = nullptr)
      : w_(w), rank_(rank), bs_(w, rank), eps_(w->nranks()), page_(page) {}
  int rank() const override { return rank_; }
  int nranks() const override { return w_->nranks(); }
  Bootstrap& bootstrap() override { return bs_; }
  Status endpoint(int peer, Endpoint** ep, const std::string&) override {
    if (!eps_[peer]) eps_[peer] = std::make_unique<FakeEndpoint>(w_, rank_, peer);
    *ep = eps_[peer].get();
    return Status::kSuccess;
  }
  Status test(Request* req, bool* done, size_t* size) override {
    auto* r = reinterpret_cast<FakeReq*>(req);
    int st = r->state.load();
    *done = st != 0;
    if (st == 0) return Status::kSuccess;
    Status status = r->status;
    std::string msg = r->message;
    if (size) *size = r->bytes;  // the world owns and frees every request
    if (st == 2) return set_error(status, kLogColl, "%s", msg.c_str());
    return Status::kSuccess;
  }
  Status wait(Request* req, size_t* size) override {
    Deadline d = Deadline::after_ms(params::timeout_ms());
    bool done = false;
    while (!done) {
      ZCX_TRY(test(req, &done, size));
      if (d.expired()) return set_error(Status::kTimeout, kLogColl, "fake wait timed out");
    }
    return Status::kSuccess;
  }
  Status progress() override { return Status::kSuccess; }
  bool request_live(const Request* req) const override { return req != nullptr; }
  void abort() override {}
  Status mem_register(void*, size_t) override { return Status::kSuccess; }
  Status mem_deregister(void*, size_t) override { return Status::kSuccess; }
  Departures* departures() override { return page_; }

 private:
  World* w_;
  int rank_;
  FakeBootstrap bs_;
  std::vector<std::unique_ptr<FakeEndpoint>> eps_;
  Departures* page_;
};

std::unique_ptr<Context> make_context(World& world, int rank, Departures* page) {
  return std::make_unique<FakeContext>(&world, rank, page);
}

void run_ranks(World& world, const std::function<void(int, Comm&)>& fn) {
  const int n = world.nranks();
  std::vector<int> all(n);
  for (int r = 0; r < n; ++r) all[r] = r;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      FakeContext ctx(&world, r);
      std::unique_ptr<Comm> comm;
      if (Comm::create(&ctx, nullptr, all, r, 0xc0ffee, "world", &comm) != Status::kSuccess) return;
      fn(r, *comm);
      // A rank that leaves closes its links (as a process exit would): peers still waiting
      // on it fail instead of matching buffers that are about to be freed.
      world.kill(r);
    });
  for (auto& t : threads) t.join();
}

}  // namespace zcx::coll::fake
