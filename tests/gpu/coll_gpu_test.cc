// Stream-ordered collectives on device buffers (zcx/coll.h with a cudaStream_t): 2 and 4
// forked ranks sharing GPU 0, each with its own non-blocking stream, once over cuda_ipc (the
// default between ranks of one host) and once staged through pinned host memory
// (ZCX_GPU_STAGING=1); 2 ranks once more over cuda_ipc with the call's buffers in 2 MiB cuMem
// segments mapped back to back (expandable segments). Every result is copied back on the same
// stream and compared on the host with exact expected values: inputs are small integers, so
// sums, averages, minima and maxima are exact in every dtype (bfloat16 and float16 included)
// whatever order the library reduces in. Each rank reports "FAIL <rank> ..." lines naming
// what differed; the last "AT" line says where a rank was when it was killed at its deadline.
// Skips, with the reason, without a GPU.
#include "coll_gpu_harness.h"

#include <gtest/gtest.h>
#include <zcx/coll.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>

namespace zcx::gpu_test {
namespace {

// ---- Allreduce ---------------------------------------------------------------------------
bool check_allreduce(Ctx& c, zcx_dtype_t d, zcx_redop_t op, size_t count, bool in_place) {
  size_t es = zcx_dtype_size(d), bytes = count * es;
  std::string what = describe("allreduce", d, zcx_redop_name(op), count, in_place);
  Bytes mine(bytes), recv(bytes, kSentinel);
  put_input(d, c.rank, c.n, 0, count, mine.data());
  if (in_place) recv = mine;
  Call call = [&](const void* s, void* r) {
    return zcx_allreduce(s, r, count, d, op, c.comm, c.stream);
  };
  if (!device_call(c, what, mine, &recv, {in_place, 0, 0}, call)) return false;
  return expect(c, what, d, recv, 0, count, [&](size_t i) { return reduced(d, op, c.n, i); });
}

bool allreduce_matrix(Ctx& c) {
  struct Case {
    zcx_dtype_t d;
    zcx_redop_t op;
  };
  const Case cases[] = {{ZCX_FLOAT32, ZCX_SUM}, {ZCX_INT32, ZCX_MAX},   {ZCX_BFLOAT16, ZCX_SUM},
                        {ZCX_FLOAT16, ZCX_SUM}, {ZCX_FLOAT64, ZCX_AVG}, {ZCX_UINT8, ZCX_MIN}};
  const size_t counts[] = {0, 1, 4093, size_t{1} << 20};
  for (const Case& k : cases)
    for (size_t count : counts)
      for (bool in_place : {false, true})
        if (!check_allreduce(c, k.d, k.op, count, in_place) && c.broken) return false;
  // 12 MiB and 28 bytes of floats: three times the largest pipeline chunk (4 MiB), cut into
  // pieces with a remainder at every rank count.
  const size_t large = (size_t{3} << 20) + 7;
  for (bool in_place : {false, true})
    if (!check_allreduce(c, ZCX_FLOAT32, ZCX_SUM, large, in_place) && c.broken)
      return false;
  return c.failures == 0;
}

// ---- Rooted and gathering collectives ----------------------------------------------------
bool check_broadcast(Ctx& c, size_t count, bool in_place) {
  const zcx_dtype_t d = ZCX_INT32;
  const int root = 1;
  std::string what = describe("broadcast root 1", d, nullptr, count, in_place);
  Bytes mine(count * 4, kSentinel), recv(count * 4, kSentinel);
  if (c.rank == root) put_input(d, root, c.n, 0, count, mine.data());
  if (in_place) recv = mine;
  Call call = [&](const void* s, void* r) {
    return zcx_broadcast(s, r, count, d, root, c.comm, c.stream);
  };
  if (!device_call(c, what, mine, &recv, {in_place, 0, 0}, call)) return false;
  return expect(c, what, d, recv, 0, count, [&](size_t i) { return input(d, root, c.n, i); });
}

bool check_reduce(Ctx& c, size_t count, bool in_place) {
  const zcx_dtype_t d = ZCX_FLOAT32;
  std::string what = describe("reduce root 0", d, "sum", count, in_place);
  Bytes mine(count * 4), recv(count * 4, kSentinel);
  put_input(d, c.rank, c.n, 0, count, mine.data());
  if (in_place) recv = mine;
  Call call = [&](const void* s, void* r) {
    return zcx_reduce(s, r, count, d, ZCX_SUM, 0, c.comm, c.stream);
  };
  if (!device_call(c, what, mine, &recv, {in_place, 0, 0}, call)) return false;
  if (c.rank == 0)
    return expect(c, what, d, recv, 0, count,
                  [&](size_t i) { return reduced(d, ZCX_SUM, c.n, i); });
  // Not the root: an out-of-place receive buffer is not written (NCCL's rule, as zcx-perf checks).
  return in_place || untouched(c, what + " (non-root receive buffer)", recv, 0, recv.size());
}

bool check_allgather(Ctx& c, size_t count, bool in_place) {
  const zcx_dtype_t d = ZCX_INT32;
  std::string what = describe("allgather", d, nullptr, count, in_place);
  size_t block = count * 4;
  Bytes mine(block), recv(block * c.n, kSentinel);
  put_input(d, c.rank, c.n, 0, count, mine.data());
  if (in_place) std::copy(mine.begin(), mine.end(), recv.begin() + c.rank * block);
  Call call = [&](const void* s, void* r) {
    return zcx_allgather(s, r, count, d, c.comm, c.stream);
  };
  if (!device_call(c, what, mine, &recv, {in_place, c.rank * block, 0}, call)) return false;
  return expect(c, what, d, recv, 0, count * c.n,
                [&](size_t i) { return input(d, static_cast<int>(i / count), c.n, i % count); });
}

bool check_reducescatter(Ctx& c, zcx_dtype_t d, size_t count, bool in_place) {
  std::string what = describe("reducescatter", d, "sum", count, in_place);
  size_t es = zcx_dtype_size(d), block = count * es;
  Bytes mine(block * c.n), recv(block, kSentinel);
  put_input(d, c.rank, c.n, 0, count * c.n, mine.data());
  if (in_place) recv = mine;  // the whole input; this rank's block is the result
  Call call = [&](const void* s, void* r) {
    return zcx_reducescatter(s, r, count, d, ZCX_SUM, c.comm, c.stream);
  };
  size_t at = in_place ? c.rank * block : 0;
  if (!device_call(c, what, mine, &recv, {in_place, 0, at}, call)) return false;
  size_t first = c.rank * count;
  return expect(c, what, d, recv, at / es, count,
                [&](size_t i) { return reduced(d, ZCX_SUM, c.n, first + i); });
}

bool check_alltoall(Ctx& c, size_t count, bool in_place) {
  const zcx_dtype_t d = ZCX_INT32;
  std::string what = describe("alltoall", d, nullptr, count, in_place);
  Bytes mine(count * 4 * c.n), recv(count * 4 * c.n, kSentinel);
  put_input(d, c.rank, c.n, 0, count * c.n, mine.data());  // block p goes to rank p
  if (in_place) recv = mine;
  Call call = [&](const void* s, void* r) {
    return zcx_alltoall(s, r, count, d, c.comm, c.stream);
  };
  if (!device_call(c, what, mine, &recv, {in_place, 0, 0}, call)) return false;
  size_t me = c.rank * count;
  return expect(c, what, d, recv, 0, count * c.n, [&](size_t i) {
    return input(d, static_cast<int>(i / count), c.n, me + i % count);
  });
}

bool rooted_and_gathers(Ctx& c) {
  for (size_t count : {size_t{1}, size_t{4093}, size_t{1} << 20})
    for (bool in_place : {false, true}) {
      (void)check_broadcast(c, count, in_place);
      (void)check_reduce(c, count, in_place);
      (void)check_allgather(c, count, in_place);
      (void)check_reducescatter(c, ZCX_FLOAT32, count, in_place);
      (void)check_reducescatter(c, ZCX_BFLOAT16, count, in_place);
      (void)check_alltoall(c, count, in_place);
      if (c.broken) return false;
    }
  return c.failures == 0;
}

// ---- Point to point ----------------------------------------------------------------------
// Outside a group: rank 0 sends to rank 1 on its stream, rank 1 receives; the others have no
// part.
bool check_pair(Ctx& c, size_t count) {
  if (c.rank > 1) return true;
  const zcx_dtype_t d = ZCX_INT32;
  std::string what = "send 0 -> recv 1, count " + std::to_string(count);
  Bytes mine(count * 4), recv(count * 4, kSentinel);
  put_input(d, c.rank, c.n, 0, count, mine.data());
  Call call = [&](const void* s, void* r) {
    return c.rank == 0 ? zcx_coll_send(s, count, d, 1, c.comm, c.stream)
                       : zcx_coll_recv(r, count, d, 0, c.comm, c.stream);
  };
  if (!device_call(c, what, mine, &recv, {}, call)) return false;
  if (c.rank == 0) return untouched(c, what + " (the sender's receive buffer)", recv, 0,
                                    recv.size());
  return expect(c, what, d, recv, 0, count, [&](size_t i) { return input(d, 0, c.n, i); });
}

// One group on the stream: this rank's block to its right neighbour, the left one's into
// recv, and to itself into recv's second half (a send to self pairs with a receive).
bool check_ring_group(Ctx& c, size_t count) {
  const zcx_dtype_t d = ZCX_INT32;
  const size_t bytes = count * 4;
  const int right = (c.rank + 1) % c.n, left = (c.rank + c.n - 1) % c.n;
  std::string what = "send/recv ring and to self in a group, count " + std::to_string(count);
  Bytes mine(bytes), recv(2 * bytes, kSentinel);
  put_input(d, c.rank, c.n, 0, count, mine.data());
  Call call = [&](const void* s, void* r) {
    void* second = static_cast<uint8_t*>(r) + bytes;
    (void)zcx_group_start();
    zcx_status_t st = zcx_coll_send(s, count, d, right, c.comm, c.stream);
    if (st == ZCX_SUCCESS) st = zcx_coll_recv(r, count, d, left, c.comm, c.stream);
    if (st == ZCX_SUCCESS) st = zcx_coll_send(s, count, d, c.rank, c.comm, c.stream);
    if (st == ZCX_SUCCESS) st = zcx_coll_recv(second, count, d, c.rank, c.comm, c.stream);
    const zcx_status_t end = zcx_group_end();
    return st != ZCX_SUCCESS ? st : end;
  };
  if (!device_call(c, what, mine, &recv, {}, call)) return false;
  return expect(c, what + " (from the left)", d, recv, 0, count,
                [&](size_t i) { return input(d, left, c.n, i); }) &&
         expect(c, what + " (to itself)", d, recv, count, count,
                [&](size_t i) { return input(d, c.rank, c.n, i); });
}

// A group's calls take one stream: a host call after a stream call fails the group, which
// then runs nothing (so no peer waits for it).
bool group_takes_one_stream(Ctx& c) {
  DeviceBuffer dev(Alloc::kCudaMalloc, 0, 256);
  int32_t host = 0;
  (void)zcx_group_start();
  const zcx_status_t on_stream =
      zcx_coll_send(dev.data(), 1, ZCX_INT32, (c.rank + 1) % c.n, c.comm, c.stream);
  const zcx_status_t on_host =
      zcx_coll_recv(&host, 1, ZCX_INT32, (c.rank + c.n - 1) % c.n, c.comm, nullptr);
  const zcx_status_t end = zcx_group_end();
  if (on_stream == ZCX_SUCCESS && on_host == ZCX_ERR_INVALID_USAGE && end == ZCX_ERR_INVALID_USAGE)
    return true;
  return fail(c, std::string("a group of a stream send and a host receive: ") +
                     zcx_status_string(on_stream) + ", " + zcx_status_string(on_host) +
                     ", group end " + zcx_status_string(end) + " (want success, then "
                     "ZCX_ERR_INVALID_USAGE twice)");
}

bool point_to_point(Ctx& c) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{4093}, size_t{1} << 20}) {
    (void)check_pair(c, count);
    (void)check_ring_group(c, count);
    if (c.broken) return false;
  }
  return group_takes_one_stream(c) && c.failures == 0;
}

// ---- Stream order ------------------------------------------------------------------------
// Without any host synchronisation: a train of device-to-device copies (so the stream is
// still busy when the collectives are issued), cudaMemsetAsync of the send buffer, allreduce
// into recv, a second allreduce in place on recv, a stream-ordered barrier, and
// cudaMemcpyAsync of recv into pinned host memory. The allreduces must see the memset bytes
// (not the stale ones uploaded first) and the copy must see the final sums.
constexpr size_t kOrderCount = size_t{1} << 22;  // int32: 16 MiB
constexpr size_t kDelayBytes = size_t{64} << 20;
constexpr double kDelayMs = 4;  // copy-engine work queued ahead: about 125 copies on an H200
constexpr double kMaxDelayCopies = 128;

// How many kDelayBytes copies keep the stream busy for about kDelayMs (2 to 128), from the
// faster of two copies timed on the stream (the first may pay for first use). On the
// simulated runtime one copy takes milliseconds, and a fixed train was most of the case's time.
int delay_copies(Ctx& c, const DeviceBuffer& a, const DeviceBuffer& b) {
  double fastest_ms = 1e9;
  for (int k = 0; k < 2; ++k) {
    const auto start = std::chrono::steady_clock::now();
    if (!cuda_ok(c,
                 c.api->copy_async(b.data(), a.data(), kDelayBytes, cudaMemcpyDeviceToDevice,
                                   c.stream),
                 "timed delay copy") ||
        !cuda_ok(c, c.api->stream_synchronize(c.stream), "cudaStreamSynchronize"))
      return -1;
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    fastest_ms = std::min(fastest_ms, took.count());
  }
  return static_cast<int>(std::clamp(std::ceil(kDelayMs / fastest_ms), 2.0, kMaxDelayCopies));
}

bool enqueue_delay(Ctx& c, const DeviceBuffer& a, const DeviceBuffer& b, int copies) {
  for (int k = 0; k < copies; ++k) {
    const DeviceBuffer& from = k % 2 ? b : a;
    const DeviceBuffer& to = k % 2 ? a : b;
    if (!cuda_ok(c,
                 c.api->copy_async(to.data(), from.data(), kDelayBytes, cudaMemcpyDeviceToDevice,
                                   c.stream),
                 "delay copy"))
      return false;
  }
  return true;
}

bool enqueue_ordered(Ctx& c, const DeviceBuffer& send, const DeviceBuffer& recv, void* host) {
  const size_t bytes = kOrderCount * 4;
  const CudaApi* a = c.api;
  if (!cuda_ok(c, a->set_async(send.data(), c.rank + 1, bytes, c.stream), "cudaMemsetAsync"))
    return false;
  zcx_status_t st =
      zcx_allreduce(send.data(), recv.data(), kOrderCount, ZCX_INT32, ZCX_SUM, c.comm, c.stream);
  if (st == ZCX_SUCCESS)
    st = zcx_allreduce(recv.data(), recv.data(), kOrderCount, ZCX_INT32, ZCX_SUM, c.comm, c.stream);
  if (st == ZCX_SUCCESS) st = zcx_barrier_comm(c.comm, c.stream);
  if (st != ZCX_SUCCESS)
    return fail(c, std::string("ordered allreduce/barrier returned ") + zcx_status_string(st) +
                       ": " + zcx_get_last_error());
  return cuda_ok(c, a->copy_async(host, recv.data(), bytes, cudaMemcpyDeviceToHost, c.stream),
                 "cudaMemcpyAsync of the result");
}

// The request forms do not take a stream (contract): refused, not run.
bool request_forms_refuse_streams(Ctx& c) {
  DeviceBuffer buf(Alloc::kCudaMalloc, 0, 256);
  zcx_coll_request_t req = nullptr;
  zcx_status_t st =
      zcx_iallreduce(buf.data(), buf.data(), 1, ZCX_INT32, ZCX_SUM, c.comm, c.stream, &req);
  if (st == ZCX_ERR_UNSUPPORTED || st == ZCX_ERR_INVALID_USAGE || st == ZCX_ERR_INVALID_ARG)
    return true;
  if (st == ZCX_SUCCESS && req != nullptr) (void)zcx_coll_wait(req);
  return fail(c, std::string("zcx_iallreduce with a stream returned ") + zcx_status_string(st) +
                     " (want ZCX_ERR_UNSUPPORTED, ZCX_ERR_INVALID_USAGE or ZCX_ERR_INVALID_ARG)");
}

bool stream_order(Ctx& c) {
  const size_t bytes = kOrderCount * 4;
  DeviceBuffer send(Alloc::kCudaMalloc, 0, bytes), recv(Alloc::kCudaMalloc, 0, bytes);
  DeviceBuffer da(Alloc::kCudaMalloc, 0, kDelayBytes), db(Alloc::kCudaMalloc, 0, kDelayBytes);
  void* host = nullptr;
  if (!send.ok() || !recv.ok() || !da.ok() || !db.ok() ||
      !cuda_ok(c, c.api->host_alloc(&host, bytes), "cudaMallocHost"))
    return fail(c, "allocation");
  std::unique_ptr<void, std::function<void(void*)>> host_guard(
      host, [&](void* p) { (void)c.api->host_free(p); });
  Bytes stale(bytes, 0x7f);  // what the buffers hold before the memset: not the expected sum
  say(c, "AT", "stream order: setup");
  if (!copy(c, send.data(), stale.data(), bytes, cudaMemcpyHostToDevice) ||
      !copy(c, recv.data(), stale.data(), bytes, cudaMemcpyHostToDevice) ||
      !cuda_ok(c, c.api->stream_synchronize(c.stream), "cudaStreamSynchronize"))
    return false;
  std::memset(host, kSentinel, bytes);
  const int copies = delay_copies(c, da, db);
  say(c, "AT", "stream order: enqueue behind " + std::to_string(copies) + " delay copies");
  if (copies < 0 || !enqueue_delay(c, da, db, copies) || !enqueue_ordered(c, send, recv, host))
    return false;
  say(c, "AT", "stream order: cudaStreamSynchronize");
  if (!cuda_ok(c, c.api->stream_synchronize(c.stream), "cudaStreamSynchronize")) return false;
  zcx_status_t async = ZCX_SUCCESS;
  if (zcx_comm_get_async_error(c.comm, &async) != ZCX_SUCCESS || async != ZCX_SUCCESS)
    return fail(c, std::string("stream order: async error ") + zcx_status_string(async));
  // Each rank's int32 is (rank+1) * 0x01010101; the second allreduce multiplies the sum by n.
  int64_t want = int64_t{c.n} * c.n * (c.n + 1) / 2 * 0x01010101;
  Bytes got(static_cast<uint8_t*>(host), static_cast<uint8_t*>(host) + bytes);
  if (!expect(c, "memset -> allreduce -> allreduce in place -> barrier -> memcpy on one stream",
              ZCX_INT32, got, 0, kOrderCount, [&](size_t) { return static_cast<double>(want); }))
    return false;
  return request_forms_refuse_streams(c);
}

class CollGpuTest : public ::testing::TestWithParam<std::tuple<int, Mode>> {
 protected:
  void run(Body body, int deadline_s) {
    ZCX_REQUIRE_GPUS(1);
    int n = std::get<0>(GetParam());
    Mode mode = std::get<1>(GetParam());
    if (mode != Mode::kStaging) {
      ASSERT_NE(ipc_ops(), nullptr) << "the cuda_ipc provider is not built";
    }
    std::vector<test::RankResult> results = test::run_rank_processes(
        n, deadline_s * 1000,
        [&](int r, int fd) { return rank_main(r, n, mode, fd, body, deadline_s); });
    for (int r = 0; r < n; ++r)
      if (results[r].exit_code != 0)
        ADD_FAILURE() << "rank " << r << " of " << n << " (" << mode_name(mode) << ") exited with "
                      << results[r].exit_code << ":\n"
                      << summary(results[r]);
  }
};

TEST_P(CollGpuTest, AllreduceDtypesCountsPlacements) { run(allreduce_matrix, 45); }
TEST_P(CollGpuTest, BroadcastReduceAllgatherReducescatterAlltoall) { run(rooted_and_gathers, 30); }
TEST_P(CollGpuTest, StreamOrderWithoutHostSync) { run(stream_order, 20); }
TEST_P(CollGpuTest, SendRecvAloneAndInGroupsOnTheStream) { run(point_to_point, 30); }

std::string case_name(const ::testing::TestParamInfo<std::tuple<int, Mode>>& info) {
  return std::to_string(std::get<0>(info.param)) + "ranks_" + mode_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(RanksAndModes, CollGpuTest,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(Mode::kCudaIpc, Mode::kStaging)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(ExpandableSegments, CollGpuTest,
                         ::testing::Combine(::testing::Values(2),
                                            ::testing::Values(Mode::kSegments)),
                         case_name);

}  // namespace
}  // namespace zcx::gpu_test
