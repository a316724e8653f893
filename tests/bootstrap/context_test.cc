// Context logic over the in-process fake provider: provider choice, lazy connect in both
// directions, retry on "retry later", registration cache, errors. Ranks are threads.
#include "base/context.h"
#include "base/registry.h"
#include "bootstrap/fake_provider.h"
#include "bootstrap/test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include <unistd.h>

namespace zcx {
namespace {

using test::fake_local_provider;
using test::fake_provider;
using test::fake_stats;

using OptionsFn = std::function<ContextOptions(int rank)>;
using BodyFn = std::function<void(Context&, int rank)>;

class ContextTest : public ::testing::Test {
 protected:
  config::ScopedOverride timeout_{"ZCX_TIMEOUT", "10"};

  // Creates n contexts on threads (options per rank), then runs body on each.
  void run(int n, const OptionsFn& options, const BodyFn& body) {
    std::vector<std::unique_ptr<Context>> ctx;
    ASSERT_NO_FATAL_FAILURE(make(n, options, &ctx));
    test::run_threads(n, [&](int r) { body(*ctx[static_cast<size_t>(r)], r); });
    ctx.clear();
    EXPECT_EQ(fake_stats().open_comms.load(), 0) << "comms leaked";
    EXPECT_EQ(fake_stats().open_ctxs.load(), 0) << "provider contexts leaked";
    EXPECT_EQ(fake_stats().registrations.load(), fake_stats().deregistrations.load());
  }

  // Creates n contexts on threads (options per rank).
  void make(int n, const OptionsFn& options, std::vector<std::unique_ptr<Context>>* out) {
    UniqueId id;
    ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
    std::vector<std::unique_ptr<Context>>& ctx = *out;
    ctx.resize(static_cast<size_t>(n));
    std::atomic<int> failures{0};
    test::run_threads(n, [&](int r) {
      std::unique_ptr<Bootstrap> bs;
      Status s = Bootstrap::init(id, r, n, &bs);
      if (ok(s)) s = Context::create(std::move(bs), options(r), &ctx[static_cast<size_t>(r)]);
      if (failed(s)) {
        ADD_FAILURE() << "rank " << r << ": " << last_error();
        ++failures;
      }
    });
    ASSERT_EQ(failures.load(), 0);
  }
};

ContextOptions both_providers(int) {
  return ContextOptions{{fake_local_provider(), fake_provider()}, "same-host"};
}

// How send_ring's buffers are known to the context: not at all, through mem_register, or
// held (hold_range) for the whole ring.
enum class Known { kNo, kRegistered, kHeld };

// device: through isend_device / irecv_device (host memory posing as GPU memory: the fake
// providers copy with memcpy).
void send_ring(Context& c, int r, size_t bytes, int rounds, bool device = false,
               Known known = Known::kNo) {
  int n = c.nranks(), next = (r + 1) % n, prev = (r + n - 1) % n;
  Endpoint *to = nullptr, *from = nullptr;
  ASSERT_EQ(c.endpoint(next, &to), Status::kSuccess) << last_error();
  ASSERT_EQ(c.endpoint(prev, &from), Status::kSuccess) << last_error();
  std::vector<uint8_t> out(bytes), in(bytes + 16);
  for (std::vector<uint8_t>* v : {&out, &in}) {
    if (known == Known::kRegistered) {
      ASSERT_EQ(c.mem_register(v->data(), v->size()), Status::kSuccess) << last_error();
    }
    if (known == Known::kHeld) c.hold_range(v->data(), v->size());
  }
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(r * 7 + i * 13 + round);
    Request *sreq = nullptr, *rreq = nullptr;
    Status rs = device ? from->irecv_device(in.data(), in.size(), 0, &rreq)
                       : from->irecv(in.data(), in.size(), 0, &rreq);
    ASSERT_EQ(rs, Status::kSuccess) << last_error();
    Status ss = device ? to->isend_device(out.data(), bytes, 0, &sreq)
                       : to->isend(out.data(), bytes, 0, &sreq);
    ASSERT_EQ(ss, Status::kSuccess) << last_error();
    size_t got = 0, sent = 0;
    ASSERT_EQ(c.wait(sreq, &sent), Status::kSuccess) << last_error();
    ASSERT_EQ(c.wait(rreq, &got), Status::kSuccess) << last_error();
    EXPECT_EQ(sent, bytes);
    ASSERT_EQ(got, bytes);
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(in[i], static_cast<uint8_t>(prev * 7 + i * 13 + round)) << "byte " << i;
  }
  for (std::vector<uint8_t>* v : {&out, &in}) {
    if (known == Known::kRegistered) {
      EXPECT_EQ(c.mem_deregister(v->data(), v->size()), Status::kSuccess) << last_error();
    }
    if (known == Known::kHeld) c.release_range(v->data(), v->size());
  }
  ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);  // peers finish before teardown
}

TEST_F(ContextTest, RingOverLocalProviderWithRegistration) {
  for (int n : {1, 2, 4}) {
    int regs_before = fake_stats().registrations.load();
    run(n, both_providers, [](Context& c, int r) {
      Endpoint* ep = nullptr;
      ASSERT_EQ(c.endpoint((r + 1) % c.nranks(), &ep), Status::kSuccess);
      EXPECT_STREQ(ep->provider()->name, "fakelocal");  // first in order, same host
      send_ring(c, r, 100000, 5);
    });
    // Buffers the context was not told about are registered for one transfer each (5 sends
    // and 5 receives per rank); run() checks that each registration was also released.
    EXPECT_EQ(fake_stats().registrations.load() - regs_before, 10 * n);
  }
  EXPECT_GT(fake_stats().send_retries.load(), 0);     // "retry later" was exercised
  EXPECT_GT(fake_stats().connect_pending.load(), 0);  // the connect loop too
}

// A registered or held range is registered whole, once per connection, however many
// transfers use it, and deregistered when the range is deregistered or released.
TEST_F(ContextTest, RegisteredAndHeldRangesRegisteredOncePerConnection) {
  for (Known known : {Known::kRegistered, Known::kHeld}) {
    const int regs_before = fake_stats().registrations.load();
    const int deregs_before = fake_stats().deregistrations.load();
    run(2, both_providers,
        [known](Context& c, int r) { send_ring(c, r, 100000, 5, false, known); });
    // Each rank: its send buffer on its send comm, its receive buffer on its recv comm.
    EXPECT_EQ(fake_stats().registrations.load() - regs_before, 2 * 2);
    EXPECT_EQ(fake_stats().deregistrations.load() - deregs_before, 2 * 2);
  }
}

// Small host transfers go through blocks of the context's own memory, registered once per
// connection, rather than registering the caller's bytes each time (the data is checked).
TEST_F(ContextTest, SmallTransfersGoThroughTheContextsRegisteredBlocks) {
  const int regs_before = fake_stats().registrations.load();
  run(2, both_providers, [](Context& c, int r) {
    send_ring(c, r, 1000, 5);
    send_ring(c, r, 1, 3);
  });
  EXPECT_EQ(fake_stats().registrations.load() - regs_before, 2 * 2);  // a slab per comm
}

// GPUDirect RDMA as the context sees it: a provider whose device takes GPU memory gets it
// registered as ZCX_MEM_CUDA, and every receive into it completes only after the provider's
// flush; host transfers on the same endpoint are neither. Without such a device the device
// calls are refused, with the reason.
TEST_F(ContextTest, DeviceMemoryRegisteredAsCudaAndFlushedAfterReceives) {
  const int cuda_before = fake_stats().cuda_registrations.load();
  const int flushes_before = fake_stats().flushes.load();
  auto gdr = [](int r) {
    return ContextOptions{{test::fake_gdr_provider()}, "host" + std::to_string(r)};
  };
  run(2, gdr,
      [](Context& c, int r) {
        Endpoint* ep = nullptr;
        ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess) << last_error();
        EXPECT_TRUE(ep->moves_device_memory());
        send_ring(c, r, 4096, 3, /*device=*/true);
        send_ring(c, r, 100, 2);  // host memory: registered as such, never flushed
      });
  // Each rank: 3 device sends and 3 device receives registered, the receives flushed.
  EXPECT_EQ(fake_stats().cuda_registrations.load() - cuda_before, 2 * 6);
  EXPECT_EQ(fake_stats().flushes.load() - flushes_before, 2 * 3);
  run(2, [](int r) { return ContextOptions{{fake_provider()}, "host" + std::to_string(r)}; },
      [](Context& c, int r) {
        Endpoint* ep = nullptr;
        ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess) << last_error();
        EXPECT_FALSE(ep->moves_device_memory());
        uint8_t byte = 0;
        Request* req = nullptr;
        EXPECT_EQ(ep->isend_device(&byte, 1, 0, &req), Status::kUnsupported);
        EXPECT_NE(std::string(last_error()).find("does not move GPU memory"), std::string::npos)
            << last_error();
        ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);
      });
}

TEST_F(ContextTest, LocalOnlyProviderSkippedAcrossHosts) {
  run(2,
      [](int r) {
        return ContextOptions{{fake_local_provider(), fake_provider()}, "host" + std::to_string(r)};
      },
      [](Context& c, int r) {
        Endpoint* ep = nullptr;
        ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess);
        EXPECT_STREQ(ep->provider()->name, "fake");
        EXPECT_EQ(c.endpoint(1 - r, &ep, "fakelocal"), Status::kNoDevice);
        send_ring(c, r, 64, 3);
      });
}

TEST_F(ContextTest, BothSidesPickTheLowerRanksOrder) {
  run(2,
      [](int r) {
        return r == 0 ? ContextOptions{{fake_provider(), fake_local_provider()}, "h"}
                      : ContextOptions{{fake_local_provider(), fake_provider()}, "h"};
      },
      [](Context& c, int r) {
        Endpoint* ep = nullptr;
        ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess);
        EXPECT_STREQ(ep->provider()->name, "fake");
        send_ring(c, r, 10, 2);
      });
}

TEST_F(ContextTest, NoCommonProviderNamesThePeer) {
  run(2,
      [](int r) {
        return r == 0 ? ContextOptions{{fake_provider(), test::fake_nodev_provider()}, "h"}
                      : ContextOptions{{fake_local_provider()}, "h"};
      },
      [](Context& c, int r) {
        Endpoint* ep = nullptr;
        EXPECT_EQ(c.endpoint(1 - r, &ep), Status::kNoDevice);
        EXPECT_NE(std::string(last_error()).find("rank " + std::to_string(1 - r)), std::string::npos)
            << last_error();
      });
}

// ZCX_PROVIDERS differing between ranks: the error names the peer's providers, also those
// this rank did not load (here tcp, which every build has).
TEST_F(ContextTest, NoCommonProviderNamesThePeersProviders) {
  config::ScopedOverride ifname("ZCX_SOCKET_IFNAME", "lo");
  run(2,
      [](int r) {
        return r == 0 ? ContextOptions{{provider_find("tcp")}, "h"}
                      : ContextOptions{{fake_local_provider()}, "h"};
      },
      [](Context& c, int r) {
        Endpoint* ep = nullptr;
        EXPECT_EQ(c.endpoint(1 - r, &ep), Status::kNoDevice);
        // (fakelocal is not built in, so rank 0 can give only its number.)
        const std::string theirs = r == 0 ? "[id" : "[tcp]";
        EXPECT_NE(std::string(last_error()).find("the peer " + theirs), std::string::npos)
            << last_error();
      });
}

// No provider with a device at all (say a ZCX_SOCKET_IFNAME that matches nothing): the error
// sends the user to zcx-info, which says why for each provider.
TEST_F(ContextTest, NoProviderWithADeviceSaysWhereToLook) {
  run(2, [](int) { return ContextOptions{{test::fake_nodev_provider()}, "h"}; },
      [](Context& c, int r) {
        Endpoint* ep = nullptr;
        EXPECT_EQ(c.endpoint(1 - r, &ep), Status::kNoDevice);
        EXPECT_NE(std::string(last_error()).find("this rank found no provider with a device: "
                                                 "`zcx-info` says why"),
                  std::string::npos) << last_error();
      });
}

TEST_F(ContextTest, ReceivePostedBeforeThePeerConnects) {
  run(2, both_providers, [](Context& c, int r) {
    Endpoint* ep = nullptr;
    ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess);
    if (r == 1) {
      char buf[32] = {};
      Request* req = nullptr;
      ASSERT_EQ(ep->irecv(buf, sizeof buf, 0, &req), Status::kSuccess);  // rank 0 not connected yet
      ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);
      size_t got = 0;
      ASSERT_EQ(c.wait(req, &got), Status::kSuccess) << last_error();
      EXPECT_EQ(got, 6u);
      EXPECT_STREQ(buf, "early");
    } else {
      ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);
      Request* req = nullptr;
      ASSERT_EQ(ep->isend("early", 6, 0, &req), Status::kSuccess);
      ASSERT_EQ(c.wait(req, nullptr), Status::kSuccess);
    }
    ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);
  });
}

TEST_F(ContextTest, InvalidArgumentsAndTruncation) {
  run(2, both_providers, [](Context& c, int r) {
    Endpoint* ep = nullptr;
    EXPECT_EQ(c.endpoint(2, &ep), Status::kInvalidArg);
    EXPECT_EQ(c.endpoint(-1, &ep), Status::kInvalidArg);
    EXPECT_EQ(c.endpoint(0, nullptr), Status::kInvalidArg);
    ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess);
    Request* req = nullptr;
    char buf[8] = {};
    EXPECT_EQ(ep->isend(nullptr, 4, 0, &req), Status::kInvalidArg);
    EXPECT_EQ(ep->isend(buf, 4, 0, nullptr), Status::kInvalidArg);
    EXPECT_EQ(ep->isend(buf, SIZE_MAX, 0, &req), Status::kInvalidArg);
    EXPECT_EQ(ep->irecv(buf + 4, SIZE_MAX - 2, 0, &req), Status::kInvalidArg);
    bool done = false;
    EXPECT_EQ(c.test(nullptr, &done, nullptr), Status::kInvalidArg);
    EXPECT_EQ(c.test(reinterpret_cast<Request*>(buf), &done, nullptr), Status::kInvalidArg);
    // A receive smaller than the message is an error, not an overflow.
    if (r == 0) {
      char big[8] = "1234567";
      ASSERT_EQ(ep->isend(big, sizeof big, 0, &req), Status::kSuccess);
      EXPECT_EQ(c.wait(req, nullptr), Status::kSuccess);
      EXPECT_EQ(c.test(req, &done, nullptr), Status::kInvalidArg);  // already freed
    } else {
      char small[4] = {};
      ASSERT_EQ(ep->irecv(small, sizeof small, 0, &req), Status::kSuccess);
      EXPECT_EQ(c.wait(req, nullptr), Status::kInvalidUsage);
    }
    ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);
  });
}

TEST_F(ContextTest, WaitIsBoundedAndAbortIsFinal) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", "0.5");
  run(2, both_providers, [](Context& c, int r) {
    Endpoint* ep = nullptr;
    ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess);
    char buf[4];
    Request* req = nullptr;
    ASSERT_EQ(ep->irecv(buf, sizeof buf, 0, &req), Status::kSuccess);
    int64_t t0 = now_ms();
    EXPECT_EQ(c.wait(req, nullptr), Status::kTimeout);  // nobody sends
    EXPECT_LT(now_ms() - t0, 2500);
    EXPECT_NE(std::string(last_error()).find("rank " + std::to_string(1 - r)), std::string::npos);
    c.abort();
    c.abort();
    EXPECT_EQ(c.endpoint(1 - r, &ep), Status::kAborted);
    EXPECT_EQ(c.progress(), Status::kAborted);
    bool done;
    EXPECT_EQ(c.test(req, &done, nullptr), Status::kAborted);
  });
}

// Which ranks left cleanly (base/departures.h), as rank 0 sees them: one that finalized with
// nothing open; not one that dropped an open receive, one that was aborted, or one whose
// communicator failed (mark_unclean); nobody before finalizing.
TEST_F(ContextTest, OnlyAContextFinalizedWithNothingOpenLeavesCleanly) {
  std::vector<std::unique_ptr<Context>> ctx;
  ASSERT_NO_FATAL_FAILURE(make(5, both_providers, &ctx));
  Endpoint* ep = nullptr;
  char buf[4];
  Request* req = nullptr;
  ASSERT_EQ(ctx[2]->endpoint(0, &ep), Status::kSuccess);
  ASSERT_EQ(ep->irecv(buf, sizeof buf, 0, &req), Status::kSuccess);
  ctx[3]->abort();
  ctx[4]->mark_unclean();
  const Departures* page = ctx[0]->departures();
  ASSERT_NE(page, nullptr);
  for (int r = 1; r < 5; ++r) EXPECT_FALSE(page->left(r)) << "rank " << r;
  for (int r = 1; r < 5; ++r) ctx[static_cast<size_t>(r)].reset();
  EXPECT_TRUE(page->left(1));
  for (int r = 2; r < 5; ++r) EXPECT_FALSE(page->left(r)) << "rank " << r;
  EXPECT_FALSE(page->left(0)) << "a rank does not watch itself";
}

TEST_F(ContextTest, SeveralThreadsShareAContext) {
  constexpr int kMessages = 200;
  run(2, both_providers, [](Context& c, int r) {
    Endpoint* ep = nullptr;
    ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess);
    std::thread sender([&] {
      for (int i = 0; i < kMessages; ++i) {
        int v = r * 100000 + i;
        Request* req = nullptr;
        ASSERT_EQ(ep->isend(&v, sizeof v, 0, &req), Status::kSuccess) << last_error();
        ASSERT_EQ(c.wait(req, nullptr), Status::kSuccess) << last_error();
      }
    });
    for (int i = 0; i < kMessages; ++i) {  // messages arrive in posting order
      int v = -1;
      Request* req = nullptr;
      ASSERT_EQ(ep->irecv(&v, sizeof v, 0, &req), Status::kSuccess) << last_error();
      ASSERT_EQ(c.wait(req, nullptr), Status::kSuccess) << last_error();
      ASSERT_EQ(v, (1 - r) * 100000 + i);
    }
    sender.join();
    ASSERT_EQ(c.bootstrap().barrier(), Status::kSuccess);
  });
}

TEST_F(ContextTest, AbortFromAnotherThreadEndsAWait) {
  run(2, both_providers, [](Context& c, int r) {
    Endpoint* ep = nullptr;
    ASSERT_EQ(c.endpoint(1 - r, &ep), Status::kSuccess);
    int v;
    Request* req = nullptr;
    ASSERT_EQ(ep->irecv(&v, sizeof v, 0, &req), Status::kSuccess);
    std::thread aborter([&] {
      usleep(100000);
      c.abort();
    });
    int64_t t0 = now_ms();
    EXPECT_EQ(c.wait(req, nullptr), Status::kAborted);  // ZCX_TIMEOUT is 10 s here
    EXPECT_LT(now_ms() - t0, 2000);
    aborter.join();
  });
}

}  // namespace
}  // namespace zcx
