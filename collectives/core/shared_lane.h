// The shared lane: one memfd segment per communicator whose ranks all run on one host, for
// small collectives. Every rank copies its contribution into its own slot and publishes it
// by storing the lane sequence number last (release); every rank then reads all the slots
// and computes the result itself (algorithms/shared.cc). A collective costs one cache-line
// hand-off per peer instead of a descriptor and a message each way through the transport.
//
// Slots are double-buffered by the parity of the lane sequence number L. Rank r writes the
// slot of L only after it finished L-1, which needed every peer's L-1 contribution, which a
// peer publishes only after it finished L-2 — the last read of the slot r now overwrites.
//
// Every member also announces the descriptor of each operation it starts outside the lane,
// so that a rank waiting in the lane for a peer that called something else reports
// kMismatch at once instead of timing out. A lane operation's descriptor travels in its
// slot; announcing it too would rewrite a line the waiting peers read, which costs the
// next publication a hand-off. The segment layout:
//   LaneHeader                  magic, token (marks the segment as this communicator's)
//   Announce[nranks]            one line per rank: a seqlock around an OpDesc
//   Slot[nranks][2]             one line: sequence, descriptor hash, up to kLaneInlineBytes
//                               of data; then the full descriptor (read only on a hash
//                               difference, for the message) and kSharedMaxBytes of data
//   BulkFlag[nranks]            one line per rank: the last bulk step it finished
//   stage[nranks][nranks*piece] the bulk lane: rank r's copy of the pieces its peers reduce
//   result[nranks][piece]       the bulk lane: the piece rank r reduced, for its peers
// A contribution of up to kLaneInlineBytes (an 8-byte allreduce) travels with its sequence
// number and descriptor hash in one cache line: one line moves per peer per collective.
//
// The bulk lane carries collectives larger than a slot (core/lane_bulk.cc), round by round;
// in an allreduce every rank copies the pieces its peers own into its stage (step 2k+1),
// reduces its own piece straight out of the peers' stages into its result area (step
// 2k+2), then copies every result area out. A byte is copied in once and out once, and
// reduced from where it lies: no copy into a receive buffer, no message, no scratch.
#pragma once

#include "common/fd.h"
#include "common/memfd.h"
#include "common/status.h"
#include "core/desc.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace zcx::coll {

inline constexpr size_t kLaneInlineBytes = 48;

// The lane's configuration as communicators read it (ZCX_COLL_SHARED_LANE, _BULK; in
// comm_lane.cc); zcx-plan reads it through these too.
bool shared_lane_configured();
size_t shared_lane_bulk_budget();

class SharedLane {
 public:
  // Rank 0: creates and maps the segment; fd() stays open until every member has mapped it.
  // bulk_piece: bytes of a bulk-lane piece (0: no bulk lane; a multiple of 64).
  static Status create(int nranks, size_t bulk_piece, std::unique_ptr<SharedLane>* out);
  // Other members: map rank 0's segment through /proc/<pid>/fd/<fd> (same user only) and
  // check that it carries `token` — a same-named host that is another machine fails here —
  // and was made with the same bulk_piece.
  static Status attach(int owner_pid, int owner_fd, uint64_t token, int nranks,
                       size_t bulk_piece, std::unique_ptr<SharedLane>* out);
  int fd() const { return fd_.get(); }
  uint64_t token() const { return token_; }
  void close_fd() { fd_.reset(); }

  // Records the operation outside the lane `rank` is starting (read by peers through
  // announced()).
  void announce(int rank, const OpDesc& d);
  // The last operation `rank` announced; false while it is being rewritten.
  bool announced(int rank, OpDesc* d) const;
  // Copies `bytes` (<= kSharedMaxBytes) of `data` into rank's slot for `seq`, then publishes.
  // `hash` is desc_hash(d).
  void publish(int rank, uint64_t seq, const OpDesc& d, uint64_t hash, const void* data,
               size_t bytes);
  // Whether `rank` has published `seq`; then *hash is its descriptor's hash.
  bool arrived(int rank, uint64_t seq, uint64_t* hash) const;
  // What `rank` published for `seq` (only after arrived() said so).
  const OpDesc& desc(int rank, uint64_t seq) const;
  const uint8_t* data(int rank, uint64_t seq, size_t bytes) const;

  // The bulk lane (0 bytes: none).
  size_t bulk_piece() const { return bulk_piece_; }
  uint8_t* bulk_stage(int rank) const;   // nranks pieces; piece j is what rank j reduces
  uint8_t* bulk_result(int rank) const;  // one piece
  void bulk_signal(int rank, uint64_t step);  // publishes (release) that rank finished `step`
  bool bulk_reached(int rank, uint64_t step) const;

 private:
  SharedLane() = default;
  Status map_and_locate(int fd, int nranks, size_t bulk_piece);
  uint8_t* slot(int rank, uint64_t seq) const;

  UniqueFd fd_;
  Mapping map_;
  uint64_t token_ = 0;
  int nranks_ = 0;
  size_t bulk_piece_ = 0;
};

}  // namespace zcx::coll
