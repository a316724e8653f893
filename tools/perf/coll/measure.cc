#include "coll/measure.h"

#include "engine/timer.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace zcx::perf {
namespace {

// why: what went wrong; "" = the library's last error.
std::string failure(const Placement& p, const char* what, const std::string& why = "") {
  return std::string(what) + " (" + p.op->name + ", " +
         std::to_string(p.shape.param) + " elements, " +
         (p.in_place ? "in place" : "out of place") + ") failed on rank " +
         std::to_string(p.call.rank) + ": " + (why.empty() ? zcx_get_last_error() : why);
}

// Device buffers: the calls are ordered on the stream (and may only be enqueued there, as
// NCCL's are). Waits for it, then asks the communicator whether an operation failed.
bool finish_on_device(const Placement& p, const CollBuffers& b, std::string* error) {
  if (b.device() == nullptr) return true;
  std::string why;
  zcx_status_t async = ZCX_SUCCESS;
  if (!b.device()->synchronize(&why)) {
    *error = failure(p, "waiting for the stream", why);
    return false;
  }
  if (zcx_comm_get_async_error(p.call.comm, &async) != ZCX_SUCCESS || async != ZCX_SUCCESS) {
    *error = failure(p, "the collective on the stream",
                     std::string(zcx_status_string(async)) + ": " + zcx_get_last_error());
    return false;
  }
  return true;
}

// iters calls; with device buffers, enqueued on the stream and then waited for as one batch
// (nccl-tests times it the same way).
bool run_iterations(const Placement& p, const CollBuffers& b, int iters, std::string* error) {
  const void* send = call_send_ptr(p, b);
  void* recv = call_recv_ptr(p, b);
  for (int i = 0; i < iters; ++i)
    if (p.op->run(send, recv, p.shape.param, p.call) != ZCX_SUCCESS) {
      *error = failure(p, "the collective");
      return false;
    }
  return finish_on_device(p, b, error);
}

// Device buffers: the host images (filled, or to be checked) to and from the device.
bool upload(const Placement& p, const CollBuffers& b, std::string* error) {
  std::string why;
  if (b.upload(placement_bytes(p), &why)) return true;
  *error = failure(p, "copying the inputs to the device", why);
  return false;
}

bool download(const Placement& p, const CollBuffers& b, std::string* error) {
  std::string why;
  if (b.download_recv(placement_bytes(p), &why)) return true;
  *error = failure(p, "copying the results from the device", why);
  return false;
}

// Each rank's mean time per iteration in each repetition, in microseconds.
// reps repetitions, each after a barrier: rep(&t) runs one and gives its time per call.
bool repeat_after_barriers(const Placement& p, int reps, const std::function<bool(double*)>& rep,
                           std::vector<double>* us, std::string* error) {
  for (int i = 0; i < reps; ++i) {
    double t = 0;
    if (zcx_barrier_comm(p.call.comm, nullptr) != ZCX_SUCCESS) {
      *error = failure(p, "the barrier before a repetition");
      return false;
    }
    if (!rep(&t)) return false;
    us->push_back(t);
  }
  return true;
}

bool time_reps(const Placement& p, const MeasureSettings& s, const CollBuffers& b,
               std::vector<double>* us, std::string* error) {
  return repeat_after_barriers(p, s.reps, [&](double* t) {
    Stopwatch watch;
    if (!run_iterations(p, b, s.iters, error)) return false;
    *t = watch.elapsed_us() / s.iters;
    return true;
  }, us, error);
}

// nccl-tests reports the mean over the ranks of their times (its -a 1 default).
bool average_over_ranks(const Placement& p, std::vector<double>* us, std::string* error) {
  if (zcx_allreduce(us->data(), us->data(), us->size(), ZCX_FLOAT64, ZCX_SUM, p.call.comm,
                    nullptr) != ZCX_SUCCESS) {
    *error = failure(p, "averaging the times over the ranks");
    return false;
  }
  for (double& t : *us) t /= p.call.nranks;
  return true;
}

bool check_once(const Placement& p, uint64_t seed, const CollBuffers& b, int64_t* wrong,
                std::string* error) {
  fill_for_check(p, seed, b);
  if (!upload(p, b, error) || !run_iterations(p, b, 1, error) || !download(p, b, error))
    return false;
  *wrong = p.in_place && !p.op->checks_in_place ? 0 : count_wrong(p, seed, b);
  if (zcx_allreduce(wrong, wrong, 1, ZCX_INT64, ZCX_SUM, p.call.comm, nullptr) != ZCX_SUCCESS) {
    *error = failure(p, "summing #wrong over the ranks");
    return false;
  }
  if (p.in_place && !p.op->checks_in_place) *wrong = -1;
  return true;
}

void to_bandwidths(const Placement& p, const std::vector<double>& us, PlacementResult* out) {
  double bytes = static_cast<double>(p.shape.param * zcx_dtype_size(p.call.dtype));
  if (p.op->algbw_times_nranks) bytes *= p.call.nranks;
  double factor = p.op->bus_factor(p.call.nranks);
  std::vector<double> alg, bus;
  for (double t : us) {
    alg.push_back(bytes / (t * 1e-6) / 1e9);
    bus.push_back(alg.back() * factor);
  }
  out->time_us = summarize(us);
  out->algbw_GBps = summarize(alg);
  out->busbw_GBps = summarize(bus);
}

// ---- --overlap ------------------------------------------------------------------------
// `us` microseconds of busy computation; every poll_us of it (0: never) the request is
// tested, as a training loop would between layers. The tests' own time is not computation:
// what they do for the transfer delays the work, as it would a real step. *req becomes null
// once it is done.
bool compute_polling(double us, int poll_us, zcx_coll_request_t* req) {
  Stopwatch watch;
  double next_poll = poll_us > 0 ? poll_us : us + 1, in_tests = 0;
  volatile uint64_t work = 0;
  for (double worked = 0; worked < us; worked = watch.elapsed_us() - in_tests) {
    for (int i = 0; i < 64; ++i) work = work + 1;
    if (*req == nullptr || worked < next_poll) continue;
    const double before = watch.elapsed_us();
    int done = 0;
    if (zcx_coll_test(*req, &done) != ZCX_SUCCESS) return false;  // the request is freed
    if (done) *req = nullptr;
    in_tests += watch.elapsed_us() - before;
    next_poll += poll_us;
  }
  return true;
}

// One repetition's time per call (us): iters calls, each posted, then computed over for
// compute_us (< 0: none, waited for at once), then waited for.
bool overlap_rep(const Placement& p, const CollBuffers& b, int iters, double compute_us,
                 int poll_us, double* us, std::string* error) {
  const void* send = call_send_ptr(p, b);
  void* recv = call_recv_ptr(p, b);
  Stopwatch watch;
  for (int i = 0; i < iters; ++i) {
    zcx_coll_request_t req = nullptr;
    if (p.op->post(send, recv, p.shape.param, p.call, &req) != ZCX_SUCCESS) {
      *error = failure(p, "posting the collective");
      return false;
    }
    bool ok = compute_us < 0 || compute_polling(compute_us, poll_us, &req);
    if (ok && req != nullptr) ok = zcx_coll_wait(req) == ZCX_SUCCESS;
    if (!ok) {
      *error = failure(p, "the posted collective");
      return false;
    }
  }
  *us = watch.elapsed_us() / iters;
  return true;
}

// reps repetitions (each after a barrier), averaged over the ranks.
bool overlap_reps(const Placement& p, const MeasureSettings& s, const CollBuffers& b,
                  double compute_us, std::vector<double>* us, std::string* error) {
  return repeat_after_barriers(p, s.reps, [&](double* t) {
    return overlap_rep(p, b, s.iters, compute_us, s.overlap_poll_us, t, error);
  }, us, error) && average_over_ranks(p, us, error);
}

}  // namespace

bool measure_overlap(const Placement& p, const MeasureSettings& s, const CollBuffers& b,
                     OverlapResult* out, std::string* error) {
  fill_for_timing(p, b);
  double ignored = 0;
  std::vector<double> pure, total, share;
  if ((s.warmup > 0 && !overlap_rep(p, b, s.warmup, -1, 0, &ignored, error)) ||
      !overlap_reps(p, s, b, -1, &pure, error))
    return false;
  out->pure_us = summarize(pure);
  out->compute_us = out->pure_us.median;  // the same on every rank: averaged over them
  if (!overlap_reps(p, s, b, out->compute_us, &total, error)) return false;
  for (double t : total) {
    const double hidden = 1.0 - (t - out->compute_us) / out->pure_us.median;
    share.push_back(100.0 * std::clamp(hidden, 0.0, 1.0));
  }
  out->total_us = summarize(total);
  out->overlap_pct = summarize(share);
  out->poll_us = s.overlap_poll_us;
  out->measured = true;
  return true;
}

bool measure_placement(const Placement& p, const MeasureSettings& s, uint64_t seed,
                       const CollBuffers& b, PlacementResult* out, std::string* error) {
  fill_for_timing(p, b);
  if (!upload(p, b, error) || !run_iterations(p, b, s.warmup, error)) return false;
  std::vector<double> us;
  if (!time_reps(p, s, b, &us, error) || !average_over_ranks(p, &us, error)) return false;
  to_bandwidths(p, us, out);
  out->wrong = -1;
  return !s.check || check_once(p, seed, b, &out->wrong, error);
}

}  // namespace zcx::perf
