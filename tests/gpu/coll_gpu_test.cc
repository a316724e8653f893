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
#include <gtest/gtest.h>
#include <zcx/coll.h>

#include <functional>
#include <sstream>

#include "collectives/process_ranks.h"
#include "coll_gpu_values.h"
#include "cuda_ipc_util.h"
#include "gpu_test_util.h"

namespace zcx::gpu_test {
namespace {

// kSegments: cuda_ipc with every buffer in 2 MiB cuMem allocations mapped back to back
// (PyTorch's expandable segments), which one allocation query does not cover.
enum class Mode { kCudaIpc, kStaging, kSegments };
using Bytes = std::vector<uint8_t>;
constexpr uint8_t kSentinel = 0xa5;         // no input is made of these bytes
constexpr const char* kZcxTimeoutS = "15";  // every library wait fails after this, not hangs

// One rank's state; failures are reported through `fd` and counted.
struct Ctx {
  int rank = 0, n = 0;
  Mode mode = Mode::kCudaIpc;
  int fd = -1;
  const CudaApi* api = nullptr;
  cudaStream_t stream = nullptr;
  zcx_comm_t comm = nullptr;
  int failures = 0;
  bool broken = false;  // a call or CUDA failed: the rank stops at the next check
};

const char* mode_name(Mode m) {
  return m == Mode::kStaging ? "staging" : m == Mode::kSegments ? "segments" : "cuda_ipc";
}
void PrintTo(Mode m, std::ostream* os) { *os << mode_name(m); }

void say(const Ctx& c, const char* kind, const std::string& text) {
  std::string line = std::string(kind) + " rank " + std::to_string(c.rank) + "/" +
                     std::to_string(c.n) + " (" + mode_name(c.mode) + "): " + text + "\n";
  if (write(c.fd, line.data(), line.size()) < 0) std::perror("report");
}
bool fail(Ctx& c, const std::string& what) {
  say(c, "FAIL", what);
  ++c.failures;
  return false;
}
// A failed call (library or CUDA) rather than a wrong result: later checks are skipped.
bool broken(Ctx& c, const std::string& what) {
  c.broken = true;
  return fail(c, what);
}
bool cuda_ok(Ctx& c, cudaError_t e, const char* call) {
  return e == cudaSuccess || fail(c, std::string(call) + ": " + c.api->get_error_name(e) + " " +
                                         c.api->get_error_string(e));
}

// ---- Checks of a host image -------------------------------------------------------------
// Elements [at, at + count) of img must equal want(k) for k = 0..count-1.
bool expect(Ctx& c, const std::string& what, zcx_dtype_t d, const Bytes& img, size_t at,
            size_t count, const std::function<double(size_t)>& want) {
  size_t es = zcx_dtype_size(d), wrong = 0, first = 0;
  double got0 = 0, want0 = 0;
  for (size_t k = 0; k < count; ++k) {
    double g = decode(d, img.data() + (at + k) * es), w = want(k);
    if (g == w) continue;
    if (wrong++ == 0) first = k, got0 = g, want0 = w;
  }
  if (wrong == 0) return true;
  std::ostringstream s;
  s.precision(17);
  s << what << ": " << wrong << " of " << count << " elements differ; first at [" << first
    << "]: got " << got0 << ", want " << want0;
  return fail(c, s.str());
}

// Bytes [from, to) of img must still hold the sentinel.
bool untouched(Ctx& c, const std::string& what, const Bytes& img, size_t from, size_t to) {
  for (size_t b = from; b < to; ++b)
    if (img[b] != kSentinel)
      return fail(c, what + ": byte " + std::to_string(b) + " outside the result was written");
  return true;
}

// ---- One call on device buffers --------------------------------------------------------
// Uploads `send` and `recv` (host images) to fresh cudaMalloc buffers S and R, runs
// call(send pointer, recv pointer) on the stream, copies R back into `recv` behind it on the
// same stream, then synchronises. In place, the call gets R + send_at (bytes) as its send
// buffer and S is not used; the receive pointer is R + recv_at.
struct Placement {
  bool in_place = false;
  size_t send_at = 0, recv_at = 0;
};
using Call = std::function<zcx_status_t(const void* send, void* recv)>;

// cudaMemcpyAsync on the rank's stream (nothing for 0 bytes).
bool copy(Ctx& c, void* to, const void* from, size_t bytes, cudaMemcpyKind kind) {
  return bytes == 0 ||
         cuda_ok(c, c.api->copy_async(to, from, bytes, kind, c.stream), "cudaMemcpyAsync");
}

bool device_call(Ctx& c, const std::string& what, const Bytes& send, Bytes* recv,
                 const Placement& p, const Call& call) {
  say(c, "AT", what);
  const Alloc alloc = c.mode == Mode::kSegments ? Alloc::kVmmSegments : Alloc::kCudaMalloc;
  DeviceBuffer s(alloc, 0, std::max<size_t>(send.size(), 256));
  DeviceBuffer r(alloc, 0, std::max<size_t>(recv->size(), 256));
  if (!s.ok() || !r.ok()) return broken(c, what + ": allocation failed");
  if (!copy(c, s.data(), send.data(), send.size(), cudaMemcpyHostToDevice) ||
      !copy(c, r.data(), recv->data(), recv->size(), cudaMemcpyHostToDevice) ||
      !cuda_ok(c, c.api->stream_synchronize(c.stream), "cudaStreamSynchronize after the upload"))
    return false;
  const void* sp = p.in_place ? static_cast<const void*>(r.data() + p.send_at) : s.data();
  zcx_status_t st = call(sp, r.data() + p.recv_at);
  if (st != ZCX_SUCCESS)
    return broken(c, what + ": returned " + zcx_status_string(st) + ": " + zcx_get_last_error());
  if (!copy(c, recv->data(), r.data(), recv->size(), cudaMemcpyDeviceToHost) ||
      !cuda_ok(c, c.api->stream_synchronize(c.stream),
               "cudaStreamSynchronize after the collective"))
    return false;
  zcx_status_t async = ZCX_SUCCESS;
  if (zcx_comm_get_async_error(c.comm, &async) != ZCX_SUCCESS || async != ZCX_SUCCESS)
    return broken(c,
                  what + ": async error " + zcx_status_string(async) + ": " + zcx_get_last_error());
  return true;
}

std::string describe(const char* op, zcx_dtype_t d, const char* redop, size_t count,
                     bool in_place) {
  return std::string(op) + " " + zcx_dtype_name(d) + (redop ? std::string(" ") + redop : "") +
         " count " + std::to_string(count) + (in_place ? " in place" : " out of place");
}

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
  // 8M floats (32 MiB): above any chunk or staging-slot size.
  for (bool in_place : {false, true})
    if (!check_allreduce(c, ZCX_FLOAT32, ZCX_SUM, size_t{8} << 20, in_place) && c.broken)
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
constexpr size_t kDelayBytes = size_t{256} << 20;
constexpr int kDelayCopies = 32;  // a few ms of copy-engine work on an H200

bool enqueue_delay(Ctx& c, const DeviceBuffer& a, const DeviceBuffer& b) {
  for (int k = 0; k < kDelayCopies; ++k) {
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
  say(c, "AT", "stream order: enqueue");
  if (!enqueue_delay(c, da, db) || !enqueue_ordered(c, send, recv, host)) return false;
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

// ---- Ranks -------------------------------------------------------------------------------
using Body = bool (*)(Ctx&);

int rank_setup_and_run(Ctx& c, Body body) {
  std::string why;
  c.api = cuda_shim_load(&why);
  if (c.api == nullptr) return fail(c, "cuda_shim_load: " + why), 2;
  if (!cuda_ok(c, c.api->set_device(0), "cudaSetDevice(0)") ||
      !cuda_ok(c, c.api->stream_create_with_flags(&c.stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags"))
    return 2;
  say(c, "AT", "zcx_comm_init_env");
  if (zcx_comm_init_env(&c.comm, nullptr) != ZCX_SUCCESS)
    return fail(c, std::string("zcx_comm_init_env: ") + zcx_get_last_error()), 2;
  bool ok = body(c);
  say(c, "AT", "zcx_comm_destroy");
  if (zcx_comm_destroy(c.comm) != ZCX_SUCCESS)
    ok = fail(c, std::string("zcx_comm_destroy: ") + zcx_get_last_error());
  (void)c.api->stream_destroy(c.stream);
  return ok && c.failures == 0 ? 0 : 1;
}

int rank_main(int rank, int n, Mode mode, int fd, Body body, int deadline_s) {
  alarm(static_cast<unsigned>(deadline_s) + 5);  // also ends the rank should the test die
  setenv("ZCX_TIMEOUT", kZcxTimeoutS, 1);
  if (mode == Mode::kStaging)
    setenv("ZCX_GPU_STAGING", "1", 1);
  else
    unsetenv("ZCX_GPU_STAGING");
  Ctx c;
  c.rank = rank;
  c.n = n;
  c.mode = mode;
  c.fd = fd;
  return rank_setup_and_run(c, body);
}

// The FAIL lines of a rank's report, or its last AT line when it has none (killed, crashed).
std::string summary(const test::RankResult& r) {
  std::istringstream in(r.report);
  std::string line, fails, last_at;
  while (std::getline(in, line)) {
    if (line.rfind("FAIL ", 0) == 0) fails += "  " + line + "\n";
    if (line.rfind("AT ", 0) == 0) last_at = line;
    if (line.rfind("[killed", 0) == 0) fails += "  " + line + " " + last_at + "\n";
  }
  if (fails.empty())
    fails = "  no FAIL line; last step: " + (last_at.empty() ? "none" : last_at) + "\n";
  return fails;
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
