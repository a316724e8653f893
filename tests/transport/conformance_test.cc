// Provider conformance: every built provider must pass these, as N ranks.
//
//   zcx-run -np 2 -- zcx_provider_conformance --gtest_filter='*/tcp'   (one rank per process)
//   zcx_provider_conformance --threads=4 --gtest_filter='*/tcp'        (ranks as threads)
//
// Each rank connects a send comm to rank+1 and a recv comm from rank-1 (a ring; at 2 ranks
// that is traffic in both directions), then checks data integrity byte by byte, grouped
// receives, completion in any order, hundreds of requests in flight and ring forwarding.
#include "base/registry.h"
#include "common/clock.h"
#include "transport/exchange.h"
#include "transport/provider_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

namespace zcx::test {
namespace {

int g_threads = 0;                   // --threads=N: ranks as threads
std::unique_ptr<Exchange> g_process;  // else: this process is one rank
std::string g_process_why;
constexpr int kWaitMs = 240000;

// One rank's view: a provider context and its two ring connections.
struct Ring {
  const zcx_provider_ops_t* ops = nullptr;
  ProviderCtx pc;
  zcx_device_props_t props{};
  void* send = nullptr;
  void* recv = nullptr;
  int rank = 0, nranks = 0, next = 0, prev = 0;
  std::vector<void*> mrs;  // registrations, released with the comms
  ~Ring() {
    for (size_t i = 0; i < mrs.size(); i += 2) (void)ops->dereg_mr(mrs[i], mrs[i + 1]);
    if (send) (void)ops->close_send(send);
    if (recv) (void)ops->close_recv(recv);
  }
  // Registration when the provider needs it (else nullptr, which it accepts).
  void* reg(void* comm, void* data, size_t size) {
    if (!(ops->flags & ZCX_PROVIDER_NEEDS_REG)) return nullptr;
    void* mh = nullptr;
    EXPECT_EQ(ops->reg_mr(comm, data, size, ZCX_MEM_HOST, &mh), ZCX_SUCCESS)
        << zcx_get_last_error();
    mrs.push_back(comm);
    mrs.push_back(mh);
    return mh;
  }
};

zcx_status_t ring_connect(const zcx_provider_ops_t* ops, Exchange& ex, Ring* r) {
  r->ops = ops;
  r->rank = ex.rank();
  r->nranks = ex.nranks();
  r->next = (r->rank + 1) % r->nranks;
  r->prev = (r->rank + r->nranks - 1) % r->nranks;
  zcx_status_t st = r->pc.init(ops, r->rank, r->nranks, ex.secret());
  if (st == ZCX_SUCCESS) st = ops->get_properties(r->pc.ctx, 0, &r->props);
  std::vector<char> handles(ZCX_HANDLE_BYTES * static_cast<size_t>(r->nranks));
  void* listen = nullptr;
  if (st == ZCX_SUCCESS)
    st = ops->listen(r->pc.ctx, 0, handles.data() + ZCX_HANDLE_BYTES * r->rank, &listen);
  if (st == ZCX_SUCCESS) st = ex.allgather(handles.data(), ZCX_HANDLE_BYTES);
  Deadline dl = Deadline::after_ms(60000);
  while (st == ZCX_SUCCESS && (r->send == nullptr || r->recv == nullptr)) {
    if (dl.expired()) st = ZCX_ERR_TIMEOUT;
    if (st == ZCX_SUCCESS && r->send == nullptr)
      st = ops->connect(r->pc.ctx, 0, handles.data() + ZCX_HANDLE_BYTES * r->next, &r->send);
    if (st == ZCX_SUCCESS && r->recv == nullptr) st = ops->accept(listen, &r->recv);
  }
  if (listen) (void)ops->close_listen(listen);
  return st;
}

using Body = void (*)(Ring& ring, Exchange& ex);

// One closing token around the ring, waited for by test(): waiting for prev's token drives
// this rank's transport until prev has finished its body. The barrier alone drives nothing,
// so a rank that finished first stopped answering: UCX sends a rendezvous reply from its
// progress, and with UCX_TLS=posix,cma and ranks as threads on busy CPUs a peer's sends then
// waited for the reply until kWaitMs. Runs after a failed body too (the peers wait for it).
void close_ring(Ring& r) {
  constexpr int kCloseTag = 0x7ff0;
  uint8_t out = 1, in = 0;
  void* buf = &in;
  size_t cap = 1;
  int tag = kCloseTag;
  void* rmh = r.reg(r.recv, &in, 1);
  void* smh = r.reg(r.send, &out, 1);
  void *rreq = nullptr, *sreq = nullptr;
  EXPECT_EQ(post_recv(r.ops, r.recv, 1, &buf, &cap, &tag, &rmh, &rreq), ZCX_SUCCESS)
      << "rank " << r.rank << ": " << zcx_get_last_error();
  EXPECT_EQ(post_send(r.ops, r.send, &out, 1, kCloseTag, smh, &sreq), ZCX_SUCCESS)
      << "rank " << r.rank << ": " << zcx_get_last_error();
  std::vector<void*> reqs;
  for (void* q : {rreq, sreq})
    if (q) reqs.push_back(q);
  EXPECT_EQ(wait_requests(r.ops, reqs, nullptr, kWaitMs), ZCX_SUCCESS)
      << "rank " << r.rank << " closing the ring: " << zcx_get_last_error();
}

void run_rank(const zcx_provider_ops_t* ops, Exchange& ex, Body body) {
  Ring ring;
  ASSERT_EQ(ring_connect(ops, ex, &ring), ZCX_SUCCESS)
      << "rank " << ex.rank() << ": " << zcx_get_last_error();
  body(ring, ex);
  close_ring(ring);
  EXPECT_EQ(ex.barrier(), ZCX_SUCCESS);  // nobody closes while a peer still transfers
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  // Runs body on every rank: on this process's rank, or on --threads ranks.
  void run(Body body) {
    const zcx_provider_ops_t* ops = provider_find(GetParam());
    ASSERT_NE(ops, nullptr);
    {
      ProviderCtx probe;
      int ndev = 0;
      if (probe.init(ops, 0, 1, 0) != ZCX_SUCCESS ||
          ops->devices(probe.ctx, &ndev) != ZCX_SUCCESS || ndev == 0)
        GTEST_SKIP() << GetParam() << " has no usable device here: " << zcx_get_last_error();
    }
    if (g_threads > 0) {
      ThreadGroup group(g_threads);
      std::vector<std::thread> ts;
      for (int r = 0; r < g_threads; ++r)
        ts.emplace_back([&, r] {
          ThreadExchange ex(&group, r);
          run_rank(ops, ex, body);
        });
      for (std::thread& t : ts) t.join();
      return;
    }
    if (!g_process) GTEST_SKIP() << g_process_why;
    if (g_process->nranks() < 2) GTEST_SKIP() << "needs at least 2 ranks";
    ASSERT_EQ(g_process->barrier(), ZCX_SUCCESS);
    run_rank(ops, *g_process, body);
  }
};

// Waits for every request, testing them in the order given (repeatedly).
void wait_all(Ring& r, std::vector<void*> reqs, std::vector<size_t>* sizes = nullptr) {
  ASSERT_EQ(wait_requests(r.ops, reqs, sizes, kWaitMs), ZCX_SUCCESS)
      << "rank " << r.rank << ": " << zcx_get_last_error();
}

// One message of `size` to next and one from prev, verified; reverse completion order.
void swap_one(Ring& r, size_t size) {
  std::vector<uint8_t> src(size), dst(size + 16, 0xa5);
  fill_pattern(src.data(), size, r.rank);
  void* buf = dst.data();
  size_t cap = size + 16;
  int tag = 3;
  void* rmh = r.reg(r.recv, buf, cap);
  void* smh = r.reg(r.send, src.data(), size);
  void *rreq, *sreq;
  ASSERT_EQ(post_recv(r.ops, r.recv, 1, &buf, &cap, &tag, &rmh, &rreq), ZCX_SUCCESS);
  ASSERT_EQ(post_send(r.ops, r.send, src.data(), size, 3, smh, &sreq), ZCX_SUCCESS);
  std::vector<size_t> sizes;
  wait_all(r, {rreq, sreq}, &sizes);
  EXPECT_EQ(sizes[0], size);
  EXPECT_EQ(check_pattern(dst.data(), size, r.prev), "");
  for (size_t i = size; i < size + 16; ++i)
    ASSERT_EQ(dst[i], 0xa5) << "wrote past the end of a " << size << "-byte message";
}

TEST_P(Conformance, PeersAreNamed) {
  run([](Ring& r, Exchange&) {
    if (r.ops->peer_info == nullptr) return;
    zcx_peer_info_t s{}, v{};
    ASSERT_EQ(r.ops->peer_info(r.send, &s), ZCX_SUCCESS);
    ASSERT_EQ(r.ops->peer_info(r.recv, &v), ZCX_SUCCESS);
    EXPECT_EQ(s.rank, r.next);
    EXPECT_EQ(v.rank, r.prev);
  });
}

TEST_P(Conformance, SizesArriveIntact) {
  run([](Ring& r, Exchange&) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, (size_t{1} << 20) + 3,
                        size_t{256} << 20}) {
      SCOPED_TRACE(size);
      swap_one(r, size);
    }
  });
}

TEST_P(Conformance, GroupedReceiveTagsPickBuffers) {
  run([](Ring& r, Exchange&) {
    std::mt19937 rng(static_cast<unsigned>(r.rank));
    for (int n = 2; n <= std::min(r.props.max_recvs, 8); ++n) {
      SCOPED_TRACE(n);
      std::vector<std::vector<uint8_t>> src(n), dst(n);
      std::vector<void*> bufs(n), mhs(n);
      std::vector<size_t> caps(n);
      std::vector<int> tags(n);
      auto size_of = [n](int k) { return static_cast<size_t>(k) * 1000 + (k % 2 ? 200000 : n); };
      for (int k = 0; k < n; ++k) {
        src[k].resize(size_of(k));
        fill_pattern(src[k].data(), src[k].size(), 100 * r.rank + k);
        dst[k].assign(size_of(k) + 100, 0);
        bufs[k] = dst[k].data();
        caps[k] = dst[k].size();
        tags[k] = 1000 + k;
        mhs[k] = r.reg(r.recv, bufs[k], caps[k]);
      }
      void* rreq;
      ASSERT_EQ(post_recv(r.ops, r.recv, n, bufs.data(), caps.data(), tags.data(), mhs.data(),
                          &rreq), ZCX_SUCCESS);
      std::vector<int> order(n);
      for (int k = 0; k < n; ++k) order[k] = k;
      std::shuffle(order.begin(), order.end(), rng);  // tags arrive in any order
      std::vector<void*> reqs;
      for (int k : order) {
        void* s;
        void* mh = r.reg(r.send, src[k].data(), src[k].size());
        ASSERT_EQ(post_send(r.ops, r.send, src[k].data(), src[k].size(), 1000 + k, mh, &s),
                  ZCX_SUCCESS);
        reqs.push_back(s);
      }
      // The sends are tested with the receive: past what a provider buffers (shm: its chunk
      // ring), a send finishes only as the receiver drains it.
      int done = 0;
      size_t sizes[8] = {};
      Deadline dl = Deadline::after_ms(kWaitMs);
      while (!done && !dl.expired()) {
        ASSERT_EQ(r.ops->test(rreq, &done, sizes), ZCX_SUCCESS) << zcx_get_last_error();
        ASSERT_EQ(test_each_once(r.ops, reqs), ZCX_SUCCESS) << zcx_get_last_error();
      }
      ASSERT_TRUE(done);
      wait_all(r, reqs);
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(sizes[k], size_of(k)) << "buffer " << k;
        EXPECT_EQ(check_pattern(dst[k].data(), size_of(k), 100 * r.prev + k), "");
      }
    }
  });
}

// Posts without waiting; when the provider says "retry later", drives the requests so far.
void post_driving(Ring& r, bool send, void* buf, size_t size, int tag, void* mh,
                  std::vector<void*>& reqs) {
  Deadline dl = Deadline::after_ms(kWaitMs);
  for (;;) {
    void* req = nullptr;
    int t = tag;
    zcx_status_t st = send ? r.ops->isend(r.send, buf, size, tag, mh, &req)
                           : r.ops->irecv(r.recv, 1, &buf, &size, &t, &mh, &req);
    ASSERT_EQ(st, ZCX_SUCCESS) << zcx_get_last_error();
    if (req) {
      reqs.push_back(req);
      return;
    }
    ASSERT_FALSE(dl.expired()) << "provider kept saying 'retry later'";
    ASSERT_EQ(test_each_once(r.ops, reqs), ZCX_SUCCESS) << zcx_get_last_error();
  }
}

TEST_P(Conformance, HundredsInFlightCompleteInAnyOrder) {
  run([](Ring& r, Exchange&) {
    EXPECT_GE(r.props.max_requests, 256);
    const int count = 300;
    std::vector<std::vector<uint8_t>> src(count), dst(count);
    std::vector<void*> reqs;
    for (int i = 0; i < count; ++i) {
      size_t size = (static_cast<size_t>(i) * 7919 + r.rank) % 30000;
      src[i].resize(size);
      fill_pattern(src[i].data(), size, r.rank * 1000 + i);
      dst[i].assign(30000, 0);
      ASSERT_NO_FATAL_FAILURE(post_driving(r, false, dst[i].data(), dst[i].size(), i,
                                           r.reg(r.recv, dst[i].data(), 30000), reqs));
      ASSERT_NO_FATAL_FAILURE(post_driving(r, true, src[i].data(), size, i,
                                           r.reg(r.send, src[i].data(), size), reqs));
    }
    std::mt19937 rng(42u + static_cast<unsigned>(r.rank));
    std::shuffle(reqs.begin(), reqs.end(), rng);
    wait_all(r, reqs);
    for (int i = 0; i < count; ++i) {
      size_t size = (static_cast<size_t>(i) * 7919 + r.prev) % 30000;
      EXPECT_EQ(check_pattern(dst[i].data(), size, r.prev * 1000 + i), "") << "message " << i;
    }
  });
}

TEST_P(Conformance, MixedSizesStreamInOrder) {
  run([](Ring& r, Exchange&) {
    auto size_of = [](int from, int i) {
      std::mt19937 g(static_cast<unsigned>(from * 7777 + i));
      return static_cast<size_t>(g() % 4 == 0 ? g() % (3 << 20) : g() % 9000);
    };
    const int count = 64;
    std::vector<std::vector<uint8_t>> src(count), dst(count);
    std::vector<void*> reqs;
    for (int i = 0; i < count; ++i) {
      src[i].resize(size_of(r.rank, i));
      fill_pattern(src[i].data(), src[i].size(), r.rank + 10 * i);
      dst[i].assign(3 << 20, 0);
      void* buf = dst[i].data();
      size_t cap = dst[i].size();
      int tag = 9;
      void *q, *mh = r.reg(r.recv, buf, cap);
      ASSERT_EQ(post_recv(r.ops, r.recv, 1, &buf, &cap, &tag, &mh, &q), ZCX_SUCCESS);
      reqs.push_back(q);
      void* smh = r.reg(r.send, src[i].data(), src[i].size());
      ASSERT_EQ(post_send(r.ops, r.send, src[i].data(), src[i].size(), 9, smh, &q),
                ZCX_SUCCESS);
      reqs.push_back(q);
    }
    std::vector<size_t> sizes;
    wait_all(r, reqs, &sizes);
    for (int i = 0; i < count; ++i) {
      EXPECT_EQ(sizes[2 * i], size_of(r.prev, i)) << "message " << i;
      EXPECT_EQ(check_pattern(dst[i].data(), size_of(r.prev, i), r.prev + 10 * i), "");
    }
  });
}

// A ring allgather: every block travels all the way round; ranks forward what they get.
TEST_P(Conformance, RingForwardsEveryBlock) {
  run([](Ring& r, Exchange&) {
    auto size_of = [](int origin) { return (size_t{1} << 20) + 13 * static_cast<size_t>(origin); };
    std::vector<std::vector<uint8_t>> blocks(r.nranks);
    blocks[r.rank].resize(size_of(r.rank));
    fill_pattern(blocks[r.rank].data(), blocks[r.rank].size(), r.rank);
    for (int step = 0; step < r.nranks - 1; ++step) {
      int out = (r.rank - step + r.nranks) % r.nranks;
      int in = (r.rank - step - 1 + r.nranks) % r.nranks;
      blocks[in].assign(size_of(in), 0);
      void* buf = blocks[in].data();
      size_t cap = blocks[in].size();
      int tag = step;
      void *rq, *sq, *mh = r.reg(r.recv, buf, cap);
      ASSERT_EQ(post_recv(r.ops, r.recv, 1, &buf, &cap, &tag, &mh, &rq), ZCX_SUCCESS);
      void* smh = r.reg(r.send, blocks[out].data(), blocks[out].size());
      ASSERT_EQ(post_send(r.ops, r.send, blocks[out].data(), blocks[out].size(), step, smh,
                          &sq), ZCX_SUCCESS);
      wait_all(r, {sq, rq});
    }
    for (int o = 0; o < r.nranks; ++o)
      EXPECT_EQ(check_pattern(blocks[o].data(), size_of(o), o), "") << "block of rank " << o;
  });
}

std::vector<std::string> built_provider_names() {
  std::vector<std::string> names;
  for (const zcx_provider_ops_t* ops : providers_built()) names.push_back(ops->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Providers, Conformance, ::testing::ValuesIn(built_provider_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Conformance);

}  // namespace
}  // namespace zcx::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (strncmp(argv[i], "--threads=", 10) == 0) zcx::test::g_threads = atoi(argv[i] + 10);
  if (zcx::test::g_threads == 0)
    zcx::test::g_process = zcx::test::bootstrap_exchange(&zcx::test::g_process_why);
  int rc = RUN_ALL_TESTS();
  zcx::test::g_process.reset();
  return rc;
}
