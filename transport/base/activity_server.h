// What the members on other hosts are doing, for a stalled operation's error.
//
// A rank reads what the members of its own host do from their departure pages
// (base/departures.h); a member on another host has no page here. So a context whose job
// spans hosts also runs one small thread that answers, on a TCP port of its own
// (ZCX_SOCKET_IFNAME's address, published with the context's records), what its departure
// page says: the collective it last called and completed, how long ago it last polled, and
// whether it failed. Only a stalled operation asks (collectives/core/comm_members.cc), each
// member at once, for at most a second in all; a member that does not answer by then is
// named as such (a stopped or hung process: its answering thread does not run either).
//
// A query carries the job secret and the asked rank; the thread answers nothing else, one
// connection at a time, each bounded (docs/WIRE.md, "Activity query"). NCCL's RAS thread
// is the model: a side channel that still answers when the data path is stuck.
#pragma once

#include "base/departures.h"
#include "common/fd.h"
#include "common/socket.h"
#include "common/status.h"

#include <cstdint>
#include <thread>
#include <vector>

namespace zcx {

// A member's answer to one query.
struct PeerActivity {
  enum class Reply : uint8_t {
    kAnswered,  // `activity` holds its answer (polled_ns on this host's clock)
    kSilent,    // connected or connecting, no answer within the time given
    kRefused,   // refused or closed unanswered, a malformed answer, or no address: nobody
                // answers there (its context finalized, or it exited)
  };
  Reply reply = Reply::kSilent;
  Departures::Activity activity;
  int64_t answered_ns = 0;  // when the answer came (judge its polled_ns at that moment: the
                            // asker may wait for slower members long after)
};

class ActivityServer {
 public:
  ActivityServer() = default;
  ActivityServer(const ActivityServer&) = delete;
  ActivityServer& operator=(const ActivityServer&) = delete;
  ~ActivityServer() { stop(); }

  // Opens the listener (port 0 on the context's interface); *bound gets its address.
  Status listen(SockAddr* bound);
  // Starts answering for `rank` of the job with `secret` from `own`'s page (which must
  // outlive the server, or stop() first). Without a listener it does nothing.
  Status start(const Departures* own, uint64_t secret, int rank);
  // Wakes and joins the thread; closes the listener. Idempotent.
  void stop();

 private:
  void serve();
  bool answer_pending();
  void answer(int fd);

  UniqueFd listen_;
  UniqueFd wake_;  // an eventfd written by stop()
  std::thread thread_;
  const Departures* own_ = nullptr;
  uint64_t secret_ = 0;
  int rank_ = -1;
  int owner_pid_ = -1;  // the process that started the thread
  int rejected_ = 0;  // queries refused (warned about for the first few)
};

// Asks `ranks[i]` at `addrs[i]` at once, as rank `from` of the job with `secret`, waiting at
// most timeout_ms in all. One answer per rank, in order (refused where it has no address).
std::vector<PeerActivity> ask_activity(const std::vector<int>& ranks,
                                       const std::vector<SockAddr>& addrs, uint64_t secret,
                                       int from, int timeout_ms);

}  // namespace zcx
