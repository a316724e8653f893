// What a communicator knows of its members beyond its links: on this host, which have
// exited (pidfd watches), which finalized and left cleanly, and which are alive but silent
// in a stalled operation (their departure pages, base/departures.h); on other hosts, which
// are silent (they answer activity queries, base/activity_server.h). A stalled or failed
// operation adds these to its error, so every survivor names the cause, not only the ranks
// linked to it.
#include "core/comm.h"

#include "common/clock.h"

#include <algorithm>
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
        !(page_ && page_->left(world_[r])))
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
    if (r != rank_ && page_ && page_->left(world_[r]))
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
  const bool polling = a.polled_ns != 0 && now - a.polled_ns <= kSilentNs;
  if (a.seq < seq) {
    // Still waiting in an earlier operation: stalled behind another member, as we are.
    if (a.done < a.seq && polling) return "";
    snprintf(buf, sizeof buf, "has not called this operation (its last call: #%llu)",
             static_cast<unsigned long long>(a.seq));
    return buf;
  }
  if (a.seq > seq || a.done >= seq || polling) return "";
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

// The same for a member of another host from its answer to an activity query, and why it
// gave none.
std::string remote_silence(const PeerActivity& p, uint64_t comm, uint64_t seq) {
  switch (p.reply) {
    case PeerActivity::Reply::kAnswered:
      return silence(p.activity, comm, seq, p.answered_ns);
    case PeerActivity::Reply::kSilent:
      return "did not answer an activity query within 1 s (a stopped or hung process, or its "
             "host unreachable)";
    case PeerActivity::Reply::kRefused:
      break;
  }
  return "refused an activity query (its context finalized, or its process exited)";
}

}  // namespace

// Members of this host publish what they do in their pages (base/departures.h); one whose
// process has exited is named by dead_members or departed_note instead. Members of other
// hosts are asked (remote_stall_note).
std::string Comm::stall_note(uint64_t seq, int64_t stalled_since_ns) {
  const int64_t now = now_ns();
  if (seq == 0 || now - stalled_since_ns < 1'000'000'000) return "";
  std::string note;
  std::vector<int> elsewhere;
  for (int r = 0; r < nranks(); ++r) {
    Departures::Activity a;
    if (r == rank_) continue;
    if (host_of_[r] != host_of_[rank_]) {
      elsewhere.push_back(r);
    } else if (page_ && page_->activity(world_[r], &a) && !member_exited(r)) {
      const std::string why = silence(a, id_, seq, now);
      if (!why.empty()) note += "; " + peer_name(r) + " " + why;
    }
  }
  return note + remote_stall_note(elsewhere, seq);
}

// Asks the first kMaxAsked of `members` (on other hosts) at once, for at most a second
// (base/activity_server.h): a stalled operation's error may wait that much longer, never
// more. A member that cannot answer is named, since a stopped process cannot.
std::string Comm::remote_stall_note(const std::vector<int>& members, uint64_t seq) {
  constexpr size_t kMaxAsked = 64;
  const size_t asked = std::min(members.size(), kMaxAsked);
  if (asked == 0) return "";
  // Only error paths ask, and this rank's operation is failing: a member that asks us while
  // we wait for the answers must not take us for silent.
  if (page_) page_->note_failed();
  std::vector<int> ranks;
  for (size_t i = 0; i < asked; ++i) ranks.push_back(world_[members[i]]);
  const std::vector<PeerActivity> answers = ctx_->ask_activity(ranks, 1000);
  if (answers.size() != asked) return "";  // the context does not ask (one host, tests' fakes)
  size_t silent = 0;
  for (const PeerActivity& a : answers) silent += a.reply == PeerActivity::Reply::kSilent;
  std::string note;
  // None answering at all more likely says the port is blocked than that all are stopped.
  const bool none_answered = asked > 1 && silent == asked;
  if (none_answered)
    note = "; none of the " + std::to_string(asked) + " members on other hosts asked answered "
           "an activity query within 1 s (all stopped, or their hosts unreachable on that port)";
  for (size_t i = 0; i < asked && !none_answered; ++i) {
    const std::string why = remote_silence(answers[i], id_, seq);
    if (!why.empty()) note += "; " + peer_name(members[i]) + " " + why;
  }
  if (members.size() > asked)
    note += "; " + std::to_string(members.size() - asked) +
            " more members on other hosts not asked";
  return note;
}

}  // namespace zcx::coll
