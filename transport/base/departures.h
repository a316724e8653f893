// Which ranks of this host finalized before their process exited.
//
// A collective that stalls looks for a member on its host whose process has exited, so that
// a rank not linked to a dead one still names it (collectives/core/comm_members.cc,
// dead_members).
// A rank that finished its last operation and then exited normally is not dead: its sends
// are already in the transport, where its peers still read them. Only the rank itself knows
// it left cleanly, and it is gone when the question is asked, so every rank publishes one
// page of its own (an anonymous memfd) in its context record, its peers on the host map it
// at set-up, and the rank writes "left" there when it finalizes its context without a
// failure. The page outlives its owner for as long as a peer maps it; a peer that could not
// map it (exited already, another pid namespace) treats that rank's exit as a death, as
// before.
//
// The page also says what its rank is doing, so that a stalled operation can name a member
// of its host that is silent rather than dead: the communicator and number of the last
// collective it called, and when it last polled inside one (CLOCK_MONOTONIC, which every
// process of the host shares). A member that never called the operation, or called it and
// stopped polling (a stopped process, a thread busy outside zcx) before completing it, is then
// named by every survivor, not only by its neighbours (collectives/core/comm_members.cc,
// stall_note). Members on other hosts answer the same over TCP (base/activity_server.h).
#pragma once

#include "common/fd.h"
#include "common/memfd.h"
#include "common/status.h"

#include <cstdint>
#include <map>

namespace zcx {

// open_own and watch run at set-up only, before any other call; after that every call may
// come from any thread without a lock (each page field is an atomic).
class Departures {
 public:
  // Creates this rank's page. On failure (logged) the rank publishes no page (fd -1).
  void open_own();
  int own_fd() const { return own_fd_.get(); }
  uint64_t own_token() const { return token_; }
  // Maps the page of `rank` (process `pid`, its fd `fd`, carrying `token`) read-only through
  // /proc/<pid>/fd/<fd>; on failure the rank stays unwatched (logged at INFO).
  void watch(int rank, int pid, int fd, uint64_t token);
  // Marks this rank as leaving cleanly (release): peers that find its process gone read it.
  void mark_left();
  // Whether `rank` has marked itself as leaving cleanly (false when unwatched).
  bool left(int rank) const;

  // What a rank is doing. comm 0: it has called no collective yet.
  struct Activity {
    uint64_t comm = 0;     // id of the communicator of its last collective call
    uint64_t seq = 0;      // that call's operation number
    uint64_t done = 0;     // the number of the last operation it completed
    int64_t polled_ns = 0;  // when it last polled inside an operation (0: never)
    bool failed = false;    // an operation of it failed: it is no longer waiting
  };
  // This rank called operation `seq` of communicator `comm` / polls inside one now (relaxed
  // stores into its own page; cheap enough for every call and every 32nd poll).
  void note_call(uint64_t comm, uint64_t seq);
  void note_done(uint64_t seq);
  void note_poll(int64_t now_ns);
  void note_failed();
  // What `rank` last published (false when unwatched); what this rank published (false
  // without a page).
  bool activity(int rank, Activity* out) const;
  bool own_activity(Activity* out) const;

 private:
  UniqueFd own_fd_;
  Mapping own_;
  uint64_t token_ = 0;
  std::map<int, Mapping> peers_;  // only the ranks of this host, usually a handful
};

}  // namespace zcx
