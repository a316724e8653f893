// CommStats: counters and the printed summary.
#include "core/comm_stats.h"

#include "common/config.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>

namespace zcx::coll {
namespace {

const config::BoolParam kStatsParam(
    "ZCX_STATS", false,
    "print each communicator's operations (by collective and algorithm, with their time in "
    "flight and the share that overlapped the caller's own work) and per-peer traffic "
    "(bytes, messages, provider) to stderr when it is destroyed or aborted");

void line(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void line(std::string* out, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  *out += buf;
  *out += '\n';
}

}  // namespace

CommStats::CommStats(int nranks) : enabled_(kStatsParam.get()) {
  if (enabled_) traffic_ = device_traffic_ = ScheduleTraffic(nranks);
}

void CommStats::add_op(CollKind kind, Algo algo, size_t bytes) {
  Tally& t = ops_[{static_cast<int>(kind), static_cast<int>(algo)}];
  ++t.calls;
  t.bytes += bytes;
}

CommStats::Posted CommStats::posted_now() const {
  const int64_t now = now_ns();
  return {now, inside_ns_ + (depth_ > 0 ? now - inside_since_ns_ : 0)};
}

void CommStats::add_time(CollKind kind, Algo algo, const Posted& p) {
  const Posted now = posted_now();
  Tally& t = ops_[{static_cast<int>(kind), static_cast<int>(algo)}];
  ++t.timed;
  t.flight_ns += now.at_ns - p.at_ns;
  t.inside_ns += std::min(now.inside_ns - p.inside_ns, now.at_ns - p.at_ns);
}

namespace {

// "<ms> ms in flight, <p>% overlapped" of the timed operations, or nothing.
std::string overlap_text(uint64_t timed, int64_t flight_ns, int64_t inside_ns) {
  if (timed == 0) return "";
  char text[96];
  const double share = flight_ns > 0 ? 100.0 * static_cast<double>(flight_ns - inside_ns) /
                                           static_cast<double>(flight_ns)
                                     : 0.0;
  snprintf(text, sizeof text, " %12.3f ms in flight %5.1f%% overlapped",
           static_cast<double>(flight_ns) / 1e6, share);
  return text;
}

}  // namespace

std::string CommStats::report(const std::string& comm, int rank,
                              const std::function<std::string(int, bool)>& link) const {
  std::string out;
  uint64_t calls = 0;
  for (const auto& [key, t] : ops_) calls += t.calls;
  line(&out, "[zcx stats] comm '%s' rank %d of %zu: %" PRIu64 " operations", comm.c_str(), rank,
       traffic_.peers.size(), calls);
  for (const auto& [key, t] : ops_)
    line(&out, "[zcx stats]   %-14s %-8s %12" PRIu64 " calls %16" PRIu64 " bytes%s",
         coll_kind_name(static_cast<CollKind>(key.first)),
         key.first == static_cast<int>(CollKind::kSendRecv) ? "-" : algo_name(static_cast<Algo>(key.second)),
         t.calls, t.bytes, overlap_text(t.timed, t.flight_ns, t.inside_ns).c_str());
  line(&out, "[zcx stats]   %6s %-15s %16s %10s %16s %10s", "peer", "link", "sent_bytes",
       "sends", "recv_bytes", "recvs");
  for (size_t r = 0; r < traffic_.peers.size(); ++r)
    for (bool device : {false, true}) {
      const PeerTraffic& p = (device ? device_traffic_ : traffic_).peers[r];
      if (p.sends + p.receives == 0) continue;
      const std::string via = link(static_cast<int>(r), device);
      line(&out, "[zcx stats]   %6zu %-15s %16" PRIu64 " %10" PRIu64 " %16" PRIu64 " %10" PRIu64,
           r, via.empty() ? "-" : via.c_str(), p.sent, p.sends, p.received, p.receives);
    }
  return out;
}

}  // namespace zcx::coll
