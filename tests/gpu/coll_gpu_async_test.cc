// Asynchronous stream-ordered calls (core/gpu_async.h), 2 forked ranks sharing GPU 0: a call
// returns before its peer has even called, the stream then waits for the result, and every
// way the wait can end badly is bounded: a silent peer (ZCX_TIMEOUT), a call that outlives
// ZCX_GPU_STREAM_TIMEOUT, zcx_comm_abort. Host calls between stream calls keep their order.
// The synchronous mode (ZCX_GPU_ASYNC=0) is the contrast: its call returns with the result.
// Each rank reports "FAIL ..." lines; the test prints them. Skips, with the reason, without
// a GPU (CI runs it against the simulated runtime, tests/gpu/fake_cuda).
#include <gtest/gtest.h>
#include <zcx/coll.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/process_ranks.h"
#include "cuda_ipc_util.h"
#include "gpu_test_util.h"

namespace zcx::gpu_test {
namespace {

constexpr size_t kCount = 1 << 16;  // int32 elements per call

struct Rank {
  int rank = 0, fd = -1, failures = 0;
  const CudaApi* api = nullptr;
  cudaStream_t stream = nullptr;
  zcx_comm_t comm = nullptr;
};

bool fail(Rank& r, const std::string& what) {
  std::string line = "FAIL rank " + std::to_string(r.rank) + ": " + what + "\n";
  if (write(r.fd, line.data(), line.size()) < 0) std::perror("report");
  ++r.failures;
  return false;
}
bool cuda_ok(Rank& r, cudaError_t e, const char* call) {
  return e == cudaSuccess || fail(r, std::string(call) + ": " + r.api->get_error_name(e));
}
double since(double t0) { return test::monotonic_s() - t0; }
void nap_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Device buffer `buf` := rank + 1 (every element), queued on the stream.
bool fill(Rank& r, const DeviceBuffer& buf) {
  std::vector<int32_t> v(kCount, r.rank + 1);
  return cuda_ok(r, r.api->copy_async(buf.data(), v.data(), kCount * 4, cudaMemcpyHostToDevice,
                                      r.stream), "cudaMemcpyAsync") &&
         cuda_ok(r, r.api->stream_synchronize(r.stream), "cudaStreamSynchronize");
}

// After the stream has finished: every element of `buf` == want.
bool check(Rank& r, const DeviceBuffer& buf, int32_t want, const char* what) {
  std::vector<int32_t> v(kCount, -1);
  if (!cuda_ok(r, r.api->copy_async(v.data(), buf.data(), kCount * 4, cudaMemcpyDeviceToHost,
                                    r.stream), "cudaMemcpyAsync") ||
      !cuda_ok(r, r.api->stream_synchronize(r.stream), "cudaStreamSynchronize"))
    return false;
  for (size_t i = 0; i < kCount; ++i)
    if (v[i] != want)
      return fail(r, std::string(what) + ": element " + std::to_string(i) + " is " +
                         std::to_string(v[i]) + ", want " + std::to_string(want));
  return true;
}

zcx_status_t allreduce(Rank& r, const DeviceBuffer& buf) {
  return zcx_allreduce(buf.data(), buf.data(), kCount, ZCX_INT32, ZCX_SUM, r.comm, r.stream);
}
// The same, which must succeed: a failure is reported as `what`.
bool allreduce_ok(Rank& r, const DeviceBuffer& buf, const char* what) {
  return allreduce(r, buf) == ZCX_SUCCESS ||
         fail(r, std::string(what) + ": " + zcx_get_last_error());
}

// One allreduce with both ranks present and waited for: the runner, its thread and the
// connections exist afterwards, so the timings below measure the calls alone.
bool warm_up(Rank& r, const DeviceBuffer& buf) {
  if (!fill(r, buf)) return false;
  if (!allreduce_ok(r, buf, "warm-up")) return false;
  return cuda_ok(r, r.api->stream_synchronize(r.stream), "cudaStreamSynchronize") &&
         check(r, buf, 3, "warm-up allreduce");
}

// Rank 1 calls `late_s` after rank 0. Async: rank 0's call returns at once and its stream
// holds until rank 1 arrived. Sync: rank 0's call itself lasts until then.
bool late_peer(Rank& r, double late_s, bool async) {
  DeviceBuffer buf(Alloc::kCudaMalloc, 0, kCount * 4);
  if (!buf.ok()) return fail(r, "cudaMalloc");
  if (!warm_up(r, buf) || !fill(r, buf)) return false;
  if (r.rank == 1) nap_s(late_s);
  const double t0 = test::monotonic_s();
  if (!allreduce_ok(r, buf, "allreduce")) return false;
  const double call_s = since(t0);
  if (!cuda_ok(r, r.api->stream_synchronize(r.stream), "cudaStreamSynchronize")) return false;
  const double done_s = since(t0);
  if (r.rank == 0 && async && call_s > late_s / 2)
    fail(r, "the asynchronous call took " + std::to_string(call_s) + " s: it waited for the peer");
  if (r.rank == 0 && !async && call_s < late_s * 0.7)
    fail(r, "the synchronous call returned after " + std::to_string(call_s) +
                " s, before the peer");
  if (r.rank == 0 && done_s < late_s * 0.7)
    fail(r, "the stream finished after " + std::to_string(done_s) + " s, before the peer called");
  return check(r, buf, 3, "allreduce with a late peer");
}

// Stream calls, a host call between them, and another stream call: each sees the last.
bool host_between(Rank& r) {
  DeviceBuffer buf(Alloc::kCudaMalloc, 0, kCount * 4);
  if (!buf.ok()) return fail(r, "cudaMalloc");
  if (!warm_up(r, buf)) return false;  // buf = 3 on both ranks
  std::vector<int32_t> host(kCount, 10 * (r.rank + 1));
  if (allreduce(r, buf) != ZCX_SUCCESS ||
      zcx_allreduce(host.data(), host.data(), kCount, ZCX_INT32, ZCX_SUM, r.comm, nullptr) !=
          ZCX_SUCCESS ||
      allreduce(r, buf) != ZCX_SUCCESS)
    return fail(r, std::string("calls: ") + zcx_get_last_error());
  if (host[0] != 30 || host[kCount - 1] != 30)
    fail(r, "the host allreduce between gave " + std::to_string(host[0]));
  return cuda_ok(r, r.api->stream_synchronize(r.stream), "cudaStreamSynchronize") &&
         check(r, buf, 12, "stream, host, stream");
}

// Rank 1 never calls (it naps `silent_s`, then leaves). Rank 0's stream must go on within
// `bound_s` of the call, and the failure must show at the next call. abort: rank 0 aborts
// the communicator meanwhile, which must return promptly.
bool silent_peer(Rank& r, double silent_s, double bound_s, bool abort, const char* want) {
  DeviceBuffer buf(Alloc::kCudaMalloc, 0, kCount * 4);
  if (!buf.ok()) return fail(r, "cudaMalloc");
  if (!warm_up(r, buf)) return false;
  if (r.rank == 1) {
    nap_s(silent_s);
    return true;
  }
  const double t0 = test::monotonic_s();
  if (!allreduce_ok(r, buf, "allreduce")) return false;
  if (abort) {
    nap_s(0.3);
    const double a0 = test::monotonic_s();
    (void)zcx_comm_abort(r.comm);
    r.comm = nullptr;
    if (since(a0) > 2.0) fail(r, "zcx_comm_abort took " + std::to_string(since(a0)) + " s");
  }
  if (!cuda_ok(r, r.api->stream_synchronize(r.stream), "cudaStreamSynchronize")) return false;
  if (since(t0) > bound_s)
    fail(r, "the stream went on after " + std::to_string(since(t0)) + " s, bound " +
                std::to_string(bound_s));
  if (abort) return true;
  nap_s(0.2);  // the progress thread records the failure as it posts the ticket
  zcx_status_t async = ZCX_SUCCESS;
  if (zcx_comm_get_async_error(r.comm, &async) != ZCX_SUCCESS || async == ZCX_SUCCESS)
    fail(r, "zcx_comm_get_async_error reports no failure");
  if (allreduce(r, buf) == ZCX_SUCCESS) return fail(r, "the next call succeeded");
  const std::string why = zcx_get_last_error();
  if (why.find(want) == std::string::npos)
    fail(r, "the next call's error does not say \"" + std::string(want) + "\": " + why);
  return true;
}

// Both ranks free the buffer of a call over cuda_ipc and get its range back for the next call,
// whose peer still maps the old buffer. Where the driver will not open the new buffer until
// that mapping closes (as the simulator), and closing waits for the stream the call holds,
// the bytes go through host memory: the sum is right and the stream goes on at once, not
// after ZCX_GPU_STREAM_TIMEOUT. The old mapping closes before the next call, which maps the
// buffer again.
bool reused_range(Rank& r) {
  auto a = std::make_unique<DeviceBuffer>(Alloc::kCudaMalloc, 0, kCount * 4);
  if (!a->ok()) return fail(r, "cudaMalloc");
  if (!warm_up(r, *a)) return false;
  a.reset();
  DeviceBuffer b(Alloc::kCudaMalloc, 0, kCount * 4);
  if (!b.ok() || !fill(r, b)) return fail(r, "cudaMalloc or fill of the second buffer");
  const double t0 = test::monotonic_s();
  if (!allreduce_ok(r, b, "allreduce into the reused range")) return false;
  if (!cuda_ok(r, r.api->stream_synchronize(r.stream), "cudaStreamSynchronize")) return false;
  if (since(t0) > 5.0) fail(r, "the stream went on after " + std::to_string(since(t0)) + " s");
  if (!check(r, b, 3, "allreduce into the reused range")) return false;
  FakeCounter refused = fake_counter("fake_cuda_ipc_refused_opens");  // null on a GPU
  const long refused_before = refused ? refused() : -1;
  if (refused_before == 0)
    fail(r, "the simulated driver refused no open: the reused range was not exercised");
  if (!allreduce_ok(r, b, "the next allreduce") ||
      !cuda_ok(r, r.api->stream_synchronize(r.stream), "cudaStreamSynchronize"))
    return false;
  if (refused && refused() != refused_before) fail(r, "the next call was refused again");
  return check(r, b, 6, "the next allreduce");
}

using Body = bool (*)(Rank&);

int rank_main(int rank, int fd, const std::vector<std::pair<const char*, const char*>>& env,
              Body body) {
  alarm(40);
  for (auto [k, v] : env) setenv(k, v, 1);
  Rank r;
  r.rank = rank, r.fd = fd;
  std::string why;
  if ((r.api = cuda_shim_load(&why)) == nullptr) return fail(r, "cuda_shim_load: " + why), 2;
  if (!cuda_ok(r, r.api->set_device(0), "cudaSetDevice") ||
      !cuda_ok(r, r.api->stream_create_with_flags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate"))
    return 2;
  if (zcx_comm_init_env(&r.comm, nullptr) != ZCX_SUCCESS)
    return fail(r, std::string("zcx_comm_init_env: ") + zcx_get_last_error()), 2;
  const bool ok = body(r);
  if (r.comm != nullptr) (void)zcx_comm_destroy(r.comm);  // may repeat a failure tested above
  (void)r.api->stream_destroy(r.stream);
  return ok && r.failures == 0 ? 0 : 1;
}

void run(std::vector<std::pair<const char*, const char*>> env, Body body) {
  ZCX_REQUIRE_GPUS(1);
  env.push_back({"ZCX_GPU_STAGING", "0"});
  std::vector<test::RankResult> res = test::run_rank_processes(
      2, 45000, [&](int rank, int fd) { return rank_main(rank, fd, env, body); });
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(res[r].exit_code, 0) << "rank " << r << ":\n" << res[r].report;
}

TEST(CollGpuAsyncTest, CallReturnsBeforeThePeerArrivesAndTheStreamWaits) {
  run({{"ZCX_TIMEOUT", "15"}}, [](Rank& r) { return late_peer(r, 1.0, true); });
}

TEST(CollGpuAsyncTest, StagedCallReturnsBeforeThePeerArrives) {
  run({{"ZCX_TIMEOUT", "15"}, {"ZCX_GPU_STAGING", "1"}},
      [](Rank& r) { return late_peer(r, 1.0, true); });
}

TEST(CollGpuAsyncTest, SynchronousModeReturnsWithTheResult) {
  run({{"ZCX_TIMEOUT", "15"}, {"ZCX_GPU_ASYNC", "0"}},
      [](Rank& r) { return late_peer(r, 1.0, false); });
}

TEST(CollGpuAsyncTest, HostCallsBetweenStreamCallsKeepTheirOrder) {
  run({{"ZCX_TIMEOUT", "15"}}, host_between);
}

// ZCX_TIMEOUT 2 s: the operation fails naming the silent rank, and the stream goes on.
TEST(CollGpuAsyncTest, SilentPeerFailsTheCallAndReleasesTheStream) {
  run({{"ZCX_TIMEOUT", "2"}},
      [](Rank& r) { return silent_peer(r, 7.0, 5.0, false, "rank 1"); });
}

// The operation would wait 20 s; the stream wait gives up after 1 s and says so.
TEST(CollGpuAsyncTest, StreamWaitGivesUpAfterItsBound) {
  run({{"ZCX_TIMEOUT", "20"}, {"ZCX_GPU_STREAM_TIMEOUT", "1"}},
      [](Rank& r) { return silent_peer(r, 4.0, 3.0, false, "ZCX_GPU_STREAM_TIMEOUT"); });
}

TEST(CollGpuAsyncTest, AbortEndsACallInFlight) {
  run({{"ZCX_TIMEOUT", "20"}}, [](Rank& r) { return silent_peer(r, 4.0, 2.5, true, ""); });
}

// ZCX_TIMEOUT 15 s and ZCX_GPU_STREAM_TIMEOUT 20 s: a stall would show as one.
TEST(CollGpuAsyncTest, PeerReusedRangeUnderAHeldStreamGoesThroughHostMemory) {
  run({{"ZCX_TIMEOUT", "15"}, {"ZCX_GPU_STREAM_TIMEOUT", "20"}}, reused_range);
}

}  // namespace
}  // namespace zcx::gpu_test
