// CommStats: counters and the printed summary.
#include "core/comm_stats.h"

#include "common/config.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

namespace zcx::coll {
namespace {

const config::BoolParam kStatsParam(
    "ZCX_STATS", false,
    "print each communicator's operations (by collective and algorithm) and per-peer traffic "
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

std::string CommStats::report(const std::string& comm, int rank,
                              const std::function<std::string(int, bool)>& link) const {
  std::string out;
  uint64_t calls = 0;
  for (const auto& [key, t] : ops_) calls += t.calls;
  line(&out, "[zcx stats] comm '%s' rank %d of %zu: %" PRIu64 " operations", comm.c_str(), rank,
       traffic_.peers.size(), calls);
  for (const auto& [key, t] : ops_)
    line(&out, "[zcx stats]   %-14s %-8s %12" PRIu64 " calls %16" PRIu64 " bytes",
         coll_kind_name(static_cast<CollKind>(key.first)),
         key.first == static_cast<int>(CollKind::kSendRecv) ? "-" : algo_name(static_cast<Algo>(key.second)),
         t.calls, t.bytes);
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
