// Large-message copies: CMA (chunk copy-out streams through common/stream_copy.h), and the
// sender's choice between CMA and the pipeline (LargeChooser, shm.h).
#include "common/clock.h"
#include "shm/shm.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace zcx::shm {
namespace {

Status cma_error(Comm* c, const char* op, int err) {
  if (err == ESRCH)
    return set_error(Status::kRemote, kLogShm, "%s died during a CMA transfer",
                     peer_name(c).c_str());
  return set_error(err == EFAULT ? Status::kProtocol : Status::kSystem, kLogShm,
                   "%s with %s failed: %s%s", op, peer_name(c).c_str(), errno_text(err),
                   err == EPERM ? " (ptrace scope forbids CMA; set ZCX_SHM_LARGE=pipeline)"
                                : "");
}

// Rates are kept over about this much copy time (older copies scaled down to make room).
constexpr double kWindowNs = 5e6;
// An arm not measured for this long is tried again with one message, at most once per
// kExploreShare times what that message takes on it: a few percent of the traffic at worst.
constexpr int64_t kStaleNs = 100'000'000;
constexpr double kExploreShare = 50;
// CMA must look this much faster: its rate is one side's half (the other side's copy of the
// other half is assumed to run as fast), the pipeline's the whole stream through one side.
// Near vCPUs, 1 MiB went to CMA in 4 of 10 runs without a margin, at two thirds the rate.
constexpr double kCmaMargin = 1.3;

int size_class(const Comm* c, size_t size) {
  int k = 0;
  for (size_t s = c->adapt_min * 2; s <= size && k < LargeChooser::kClasses - 1; s *= 2) ++k;
  return k;
}

double rate_of(const LargeChooser::Rate& r) { return r.ns > 0 ? r.bytes / r.ns : 0; }

// Whether an arm (CMA or the pipeline) of a class is due to be (re)measured now, for a
// message of `size`.
bool due(const LargeChooser::Rate& r, size_t size, int64_t now) {
  if (r.trying) return false;
  if (r.at_ns == 0) return true;
  const double own = rate_of(r);
  const double wait = std::max(static_cast<double>(kStaleNs),
                               own > 0 ? kExploreShare * static_cast<double>(size) / own : 0);
  return static_cast<double>(now - r.at_ns) > wait;
}

// An arm due for a measurement (the pipeline first), else the faster one.
bool choose_cma(Comm* c, size_t size) {
  LargeChooser::Rate(&x)[2] = c->chooser.rate[size_class(c, size)];
  const int64_t now = now_ns();
  for (int a = 0; a < 2; ++a)
    if (due(x[a], size, now)) {
      x[a].trying = true;
      return a == 1;
    }
  return rate_of(x[1]) > kCmaMargin * rate_of(x[0]);
}

bool cma_permitted(Comm* c) {
  return c->cma_ok && c->rline->cma_ok.load(std::memory_order_acquire) == 1;
}

}  // namespace

bool use_cma(Comm* c, Request* r) {
  if (r->cma >= 0) return r->cma == 1;
  bool cma = false;
  if (cma_permitted(c)) {
    if (adaptive(c, r->size)) cma = choose_cma(c, r->size);
    else cma = c->large == LargeMode::kCma ||
               (c->large == LargeMode::kAuto && r->size >= c->cma_min);
  }
  r->cma = cma ? 1 : 0;
  return cma;
}

void copy_rate(Comm* c, bool cma, size_t size, size_t bytes, int64_t start_ns) {
  LargeChooser::Rate& x = c->chooser.rate[size_class(c, size)][cma ? 1 : 0];
  const int64_t now = now_ns();
  const double t = static_cast<double>(std::max<int64_t>(now - start_ns, 1));
  if (x.ns + t > kWindowNs && x.ns > 0) {  // older copies make room for this one
    const double keep = std::max(0.0, (kWindowNs - t) / x.ns);
    x.bytes *= keep, x.ns *= keep;
  }
  x.bytes += static_cast<double>(bytes);
  x.ns += t;
  x.at_ns = now;
  x.trying = false;
}

// A group measures its cut when it streams at least twice the ring: the receiver's pace
// then sets how fast the stream drains whichever cut it takes.
bool cut_measurable(const Comm* c, size_t bytes) {
  return c->cut == StreamCut::kAuto && c->layout.fine_nchunks != 0 &&
         bytes >= 2 * c->layout.ring_bytes();
}

// The median of a cut's last groups: one group slowed by a preemption must not turn the
// choice (a time-weighted window of 63 MiB groups did, for 100 ms at a time).
double median_rate(const CutChooser::Arm& a) {
  const int n = std::min(a.count, CutChooser::kKeep);
  double v[CutChooser::kKeep];
  for (int i = 0; i < n; ++i) {  // insertion sort of at most kKeep values
    int j = i;
    for (; j > 0 && v[j - 1] > a.rate[i]; --j) v[j] = v[j - 1];
    v[j] = a.rate[i];
  }
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

// Due: fewer than kTrialGroups groups measured since its record began, or none for
// kStaleNs. One group each decided by chance: a wrong pick then held for 100 ms.
bool arm_due(const CutChooser::Arm& a, int64_t now) {
  constexpr int kTrialGroups = 3;
  return !a.trying && (a.count < kTrialGroups || now - a.at_ns > kStaleNs);
}

// A cut due for a measurement when the group can measure it (of two due, the one measured
// longer ago: coarse first, then they alternate, so where measurable groups come further
// apart than kStaleNs the coarse record, stale each time, does not starve the fine one);
// else the faster one; while neither is known, the ring's current cut (no change, no wait).
bool choose_fine(Comm* c, size_t bytes, bool* trial) {
  *trial = false;
  if (c->layout.fine_nchunks == 0 || c->cut == StreamCut::kCoarse) return false;
  if (c->cut == StreamCut::kFine) return true;
  CutChooser::Arm(&x)[2] = c->cuts.arm;
  if (cut_measurable(c, bytes)) {
    const int64_t now = now_ns();
    const bool due[2] = {arm_due(x[0], now), arm_due(x[1], now)};
    if (due[0] || due[1]) {
      const int a = due[0] && (!due[1] || x[0].at_ns <= x[1].at_ns) ? 0 : 1;
      x[a].trying = true;
      *trial = true;
      return a == 1;
    }
  }
  if (x[0].count == 0 || x[1].count == 0) return c->cuts.ring_fine;
  return median_rate(x[1]) > median_rate(x[0]);
}

// A cut not measured for kStaleNs starts its record afresh: the placement may have changed.
void cut_rate(Comm* c, bool fine, size_t bytes, int64_t start_ns) {
  CutChooser::Arm& a = c->cuts.arm[fine ? 1 : 0];
  const int64_t now = now_ns();
  if (a.count > 0 && now - a.at_ns > kStaleNs) a.count = 0;
  a.rate[a.count++ % CutChooser::kKeep] =
      static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(now - start_ns, 1));
  a.at_ns = now;
}

Status cma_read(Comm* c, void* dst, uint64_t src, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec local{static_cast<uint8_t*>(dst) + done, n - done};
    iovec remote{reinterpret_cast<void*>(src + done), n - done};
    ssize_t got = process_vm_readv(c->peer.pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return cma_error(c, "process_vm_readv", got < 0 ? errno : EFAULT);
    done += static_cast<size_t>(got);
  }
  return Status::kSuccess;
}

Status cma_write(Comm* c, uint64_t dst, const void* src, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec local{const_cast<uint8_t*>(static_cast<const uint8_t*>(src)) + done, n - done};
    iovec remote{reinterpret_cast<void*>(dst + done), n - done};
    ssize_t put = process_vm_writev(c->peer.pid, &local, 1, &remote, 1, 0);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return cma_error(c, "process_vm_writev", put < 0 ? errno : EFAULT);
    done += static_cast<size_t>(put);
  }
  return Status::kSuccess;
}

}  // namespace zcx::shm
