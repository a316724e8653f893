// What a communicator knows of its members on this host beyond its links: which have
// exited (pidfd watches), which finalized and left cleanly, and which are alive but silent
// in a stalled operation (their departure pages, base/departures.h). A stalled or failed
// operation adds these to its error, so every survivor names the cause, not only the ranks
// linked to it.
#include "core/comm.h"

#include "common/clock.h"

#include <cstdio>

namespace zcx::coll {

// Members on this host (same host name, as the hierarchical algorithms assume) are watched
// through their pids from the bootstrap; members elsewhere are not (their links report it).
// A member that finalized cleanly before it exited is not dead: it had finished its part,
// and what it sent is still in the transport (base/departures.h).
std::vector<int> Comm::dead_members() {
  std::vector<int> dead;
  for (int r = 0; r < nranks(); ++r)
    if (r != rank_ && host_of_[r] == host_of_[rank_] && member_exited(r) &&
        !ctx_->left_cleanly(world_[r]))
      dead.push_back(r);
  return dead;
}

// Whether member r's process is known to have exited (its watch is opened on first use;
// one that finds the process gone, then or later, stays gone).
bool Comm::member_exited(int r) {
  if (watches_.empty()) watches_.resize(world_.size());
  if (!watches_[r]) {
    const int pid = ctx_->bootstrap().pid(world_[r]);
    if (pid <= 0) return false;
    watches_[r] = std::make_unique<ProcessWatch>();
    (void)watches_[r]->open(pid);  // kRemote when it exited before we looked: reads gone
  }
  return !watches_[r]->alive();
}

std::string Comm::departed_note() {
  std::string note;
  for (int r = 0; r < nranks(); ++r)
    if (r != rank_ && ctx_->left_cleanly(world_[r]))
      note += "; " + peer_name(r) + " finalized and exited before this operation ended";
  return note;
}

namespace {

// Why `a` (a member's published activity) looks silent in operation `seq` of communicator
// `comm` at `now`, or "" when it does not: it is waiting with us, or has completed the
// operation (a broadcast's root may have long before we stalled).
std::string silence(const Departures::Activity& a, uint64_t comm, uint64_t seq, int64_t now) {
  constexpr int64_t kSilentNs = 1'000'000'000;
  char buf[160];
  if (a.failed) return "";  // gave up on an error of its own, which names its cause
  if (a.comm == 0) return "has called no collective yet";
  if (a.comm != comm) return "last called a collective of another communicator";
  if (a.seq < seq) {
    snprintf(buf, sizeof buf, "has not called this operation (its last call: #%llu)",
             static_cast<unsigned long long>(a.seq));
    return buf;
  }
  if (a.seq > seq || a.done >= seq || (a.polled_ns != 0 && now - a.polled_ns <= kSilentNs))
    return "";
  // polled_ns is written when a wait reads the clock: 0 when no wait of this rank has yet.
  std::string last;
  if (a.polled_ns != 0) {
    snprintf(buf, sizeof buf, ", last seen polling %.1f s ago",
             static_cast<double>(now - a.polled_ns) / 1e9);
    last = buf;
  }
  return "called this operation but is not polling it (a stopped process, or a thread busy "
         "outside zcx" + last + ")";
}

}  // namespace

// Only members of this host publish what they do (base/departures.h); one whose process has
// exited is named by dead_members or departed_note instead.
std::string Comm::stall_note(uint64_t seq, int64_t stalled_since_ns) {
  const int64_t now = now_ns();
  if (seq == 0 || now - stalled_since_ns < 1'000'000'000) return "";
  std::string note;
  for (int r = 0; r < nranks(); ++r) {
    Departures::Activity a;
    if (r == rank_ || host_of_[r] != host_of_[rank_] || !ctx_->peer_activity(world_[r], &a) ||
        member_exited(r))
      continue;
    const std::string why = silence(a, id_, seq, now);
    if (!why.empty()) note += "; " + peer_name(r) + " " + why;
  }
  return note;
}

}  // namespace zcx::coll
