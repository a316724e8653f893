// The harness of the stream-ordered collective tests (coll_gpu_test.cc): one rank's state,
// its report lines ("FAIL ..." for what differed, "AT ..." for where it was), checks of a host
// image, one call on freshly uploaded device buffers, and a forked rank's set-up and summary.
#pragma once

#include <gtest/gtest.h>
#include <zcx/coll.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/process_ranks.h"
#include "coll_gpu_values.h"
#include "cuda_ipc_util.h"
#include "gpu_test_util.h"

namespace zcx::gpu_test {
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

inline const char* mode_name(Mode m) {
  return m == Mode::kStaging ? "staging" : m == Mode::kSegments ? "segments" : "cuda_ipc";
}
inline void PrintTo(Mode m, std::ostream* os) { *os << mode_name(m); }

inline void say(const Ctx& c, const char* kind, const std::string& text) {
  std::string line = std::string(kind) + " rank " + std::to_string(c.rank) + "/" +
                     std::to_string(c.n) + " (" + mode_name(c.mode) + "): " + text + "\n";
  if (write(c.fd, line.data(), line.size()) < 0) std::perror("report");
}
inline bool fail(Ctx& c, const std::string& what) {
  say(c, "FAIL", what);
  ++c.failures;
  return false;
}
// A failed call (library or CUDA) rather than a wrong result: later checks are skipped.
inline bool broken(Ctx& c, const std::string& what) {
  c.broken = true;
  return fail(c, what);
}
inline bool cuda_ok(Ctx& c, cudaError_t e, const char* call) {
  return e == cudaSuccess || fail(c, std::string(call) + ": " + c.api->get_error_name(e) + " " +
                                         c.api->get_error_string(e));
}

// ---- Checks of a host image -------------------------------------------------------------
// The FAIL line for elements that differ: every element decoded and compared as a value.
template <class Want>
bool report_differences(Ctx& c, const std::string& what, zcx_dtype_t d, const uint8_t* got,
                        size_t count, Want want) {
  size_t es = zcx_dtype_size(d), wrong = 0, first = 0;
  double got0 = 0, want0 = 0;
  for (size_t k = 0; k < count; ++k) {
    double g = decode(d, got + k * es), w = want(k);
    if (g == w) continue;
    if (wrong++ == 0) first = k, got0 = g, want0 = w;
  }
  if (wrong == 0) return true;  // only the bytes differed (-0 for +0)
  std::ostringstream s;
  s.precision(17);
  s << what << ": " << wrong << " of " << count << " elements differ; first at [" << first
    << "]: got " << got0 << ", want " << want0;
  return fail(c, s.str());
}

// Elements [at, at + count) of img must equal want(k) for k = 0..count-1. Every wanted value
// is exact in d, so equal bytes mean equal values: the image is compared with the wanted one
// a block at a time with memcmp (one range check under ThreadSanitizer, not one per element),
// and only a difference is looked at element by element.
template <class Want>
bool expect(Ctx& c, const std::string& what, zcx_dtype_t d, const Bytes& img, size_t at,
            size_t count, Want want) {
  constexpr size_t kBlock = 1024;  // elements
  const size_t es = zcx_dtype_size(d);
  uint8_t ref[kBlock * sizeof(double)];
  const uint8_t* got = img.data() + at * es;
  for (size_t from = 0; from < count; from += kBlock) {
    const size_t n = std::min(kBlock, count - from);
    for (size_t k = 0; k < n; ++k) encode(d, want(from + k), ref + k * es);
    if (std::memcmp(got + from * es, ref, n * es) != 0)
      return report_differences(c, what, d, got, count, want);
  }
  return true;
}

// Bytes [from, to) of img must still hold the sentinel.
inline bool untouched(Ctx& c, const std::string& what, const Bytes& img, size_t from, size_t to) {
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
inline bool copy(Ctx& c, void* to, const void* from, size_t bytes, cudaMemcpyKind kind) {
  return bytes == 0 ||
         cuda_ok(c, c.api->copy_async(to, from, bytes, kind, c.stream), "cudaMemcpyAsync");
}

inline bool device_call(Ctx& c, const std::string& what, const Bytes& send, Bytes* recv,
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

inline std::string describe(const char* op, zcx_dtype_t d, const char* redop, size_t count,
                            bool in_place) {
  return std::string(op) + " " + zcx_dtype_name(d) + (redop ? std::string(" ") + redop : "") +
         " count " + std::to_string(count) + (in_place ? " in place" : " out of place");
}
// ---- Ranks -------------------------------------------------------------------------------
using Body = bool (*)(Ctx&);

inline int rank_setup_and_run(Ctx& c, Body body) {
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

inline int rank_main(int rank, int n, Mode mode, int fd, Body body, int deadline_s) {
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
inline std::string summary(const test::RankResult& r) {
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

}  // namespace zcx::gpu_test
