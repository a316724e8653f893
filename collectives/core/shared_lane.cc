// The shared lane's segment: layout, creation, attachment, publication (see shared_lane.h).
#include "core/shared_lane.h"

#include "common/log.h"
#include "common/random.h"
#include "select/select.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace zcx::coll {
namespace {

constexpr uint64_t kLaneMagic = 0x454e414c58435aull;  // "ZCXLANE"
constexpr size_t kLine = 64;
constexpr size_t kWords = sizeof(OpDesc) / sizeof(uint64_t);

struct alignas(kLine) LaneHeader {
  uint64_t magic;
  uint64_t token;
  uint32_t nranks;
  uint32_t slot_bytes;
  uint64_t bulk_piece;
};

// A seqlock around a descriptor: odd while its owner rewrites it. Words are atomics, so a
// reader racing the writer reads stale or mixed words (then retries), never torn ones.
struct alignas(kLine) Announce {
  std::atomic<uint64_t> version;
  std::atomic<uint64_t> words[kWords];
};

// The line peers spin on: the sequence number (stored last, release), the descriptor's hash
// and a small contribution, so that an 8-byte allreduce moves one line per peer.
struct alignas(kLine) SlotHead {
  std::atomic<uint64_t> seq;
  uint64_t desc_hash;
  uint8_t inline_data[kLaneInlineBytes];
};
static_assert(sizeof(SlotHead) == kLine, "the published line is one cache line");

struct Slot {
  SlotHead head;
  OpDesc desc;  // read by peers only when the hashes differ
  uint8_t data[kSharedMaxBytes];
};
static_assert(sizeof(OpDesc) == kLine, "the descriptor fills the second line");

// The last bulk step a rank finished (stored last, release).
struct alignas(kLine) BulkFlag {
  std::atomic<uint64_t> step;
};

constexpr size_t kSlotStride = sizeof(Slot);
static_assert(kSlotStride % kLine == 0, "slots stay line-aligned");

size_t page_up(size_t v) { return (v + 4095) / 4096 * 4096; }
size_t announce_off() { return sizeof(LaneHeader); }
size_t slots_off(int nranks) {
  return page_up(announce_off() + sizeof(Announce) * static_cast<size_t>(nranks));
}
size_t flags_off(int nranks) { return slots_off(nranks) + kSlotStride * 2 * nranks; }
size_t stages_off(int nranks) {
  return page_up(flags_off(nranks) + sizeof(BulkFlag) * static_cast<size_t>(nranks));
}
size_t stage_bytes(int nranks, size_t piece) { return piece * static_cast<size_t>(nranks); }
size_t results_off(int nranks, size_t piece) {
  return stages_off(nranks) + stage_bytes(nranks, piece) * static_cast<size_t>(nranks);
}
size_t total_bytes(int nranks, size_t piece) {
  return results_off(nranks, piece) + piece * static_cast<size_t>(nranks);
}

}  // namespace

Status SharedLane::map_and_locate(int fd, int nranks, size_t bulk_piece) {
  ZCX_TRY(map_.map(fd, total_bytes(nranks, bulk_piece)));
  nranks_ = nranks;
  bulk_piece_ = bulk_piece;
  return Status::kSuccess;
}

Status SharedLane::create(int nranks, size_t bulk_piece, std::unique_ptr<SharedLane>* out) {
  if (nranks < 2 || nranks > kSharedMaxRanks || bulk_piece % kLine != 0)
    return set_error(Status::kInvalidArg, kLogColl, "shared lane: %d ranks (2..%d), bulk "
                     "piece %zu bytes (a multiple of %zu)", nranks, kSharedMaxRanks, bulk_piece,
                     kLine);
  std::unique_ptr<SharedLane> lane(new SharedLane());
  ZCX_TRY(memfd_create_reserved(total_bytes(nranks, bulk_piece), "a communicator's shared lane",
                                kLogColl, &lane->fd_));
  ZCX_TRY(lane->map_and_locate(lane->fd_.get(), nranks, bulk_piece));
  auto* h = reinterpret_cast<LaneHeader*>(lane->map_.data());  // memfd pages start zeroed
  lane->token_ = random_u64() | 1;
  h->token = lane->token_;
  h->nranks = static_cast<uint32_t>(nranks);
  h->slot_bytes = static_cast<uint32_t>(kSharedMaxBytes);
  h->bulk_piece = bulk_piece;
  h->magic = kLaneMagic;
  *out = std::move(lane);
  return Status::kSuccess;
}

Status SharedLane::attach(int owner_pid, int owner_fd, uint64_t token, int nranks,
                          size_t bulk_piece, std::unique_ptr<SharedLane>* out) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", owner_pid, owner_fd);
  UniqueFd fd(open(path, O_RDWR | O_CLOEXEC));
  if (!fd.valid())
    return set_error(Status::kSystem, kLogColl, "shared lane: cannot open rank 0's segment "
                     "(%s): %s", path, errno_text(errno));
  if (!ok(memfd_check(fd.get(), total_bytes(nranks, bulk_piece), kLogColl)))
    return set_error(Status::kProtocol, kLogColl, "shared lane: %s has not the size %d ranks "
                     "and a bulk piece of %zu bytes need (is ZCX_COLL_SHARED_BULK the same on "
                     "every rank?): %s", path, nranks, bulk_piece, last_error());
  std::unique_ptr<SharedLane> lane(new SharedLane());
  ZCX_TRY(lane->map_and_locate(fd.get(), nranks, bulk_piece));
  const auto* h = reinterpret_cast<const LaneHeader*>(lane->map_.data());
  if (h->magic != kLaneMagic || h->token != token || h->nranks != static_cast<uint32_t>(nranks) ||
      h->slot_bytes != kSharedMaxBytes || h->bulk_piece != bulk_piece)
    return set_error(Status::kProtocol, kLogColl, "shared lane: %s is not this communicator's "
                     "segment (rank 0 runs on another machine with the same host name?)", path);
  lane->token_ = token;
  *out = std::move(lane);
  return Status::kSuccess;
}

void SharedLane::announce(int rank, const OpDesc& d) {
  auto* a = reinterpret_cast<Announce*>(map_.data() + announce_off()) + rank;
  uint64_t words[kWords];
  memcpy(words, &d, sizeof d);
  const uint64_t v = a->version.load(std::memory_order_relaxed);
  a->version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (size_t i = 0; i < kWords; ++i) a->words[i].store(words[i], std::memory_order_relaxed);
  a->version.store(v + 2, std::memory_order_release);
}

bool SharedLane::announced(int rank, OpDesc* d) const {
  const auto* a = reinterpret_cast<const Announce*>(map_.data() + announce_off()) + rank;
  const uint64_t v = a->version.load(std::memory_order_acquire);
  if (v == 0 || (v & 1) != 0) return false;
  uint64_t words[kWords];
  for (size_t i = 0; i < kWords; ++i) words[i] = a->words[i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (a->version.load(std::memory_order_relaxed) != v) return false;
  memcpy(d, words, sizeof *d);
  return true;
}

uint8_t* SharedLane::slot(int rank, uint64_t seq) const {
  return map_.data() + slots_off(nranks_) + kSlotStride * (2 * static_cast<size_t>(rank) + (seq & 1));
}

void SharedLane::publish(int rank, uint64_t seq, const OpDesc& d, uint64_t hash,
                         const void* data, size_t bytes) {
  auto* s = reinterpret_cast<Slot*>(slot(rank, seq));
  s->desc = d;
  if (bytes > kLaneInlineBytes) memcpy(s->data, data, bytes);
  else if (bytes > 0) memcpy(s->head.inline_data, data, bytes);
  s->head.desc_hash = hash;
  s->head.seq.store(seq, std::memory_order_release);
}

bool SharedLane::arrived(int rank, uint64_t seq, uint64_t* hash) const {
  const auto* s = reinterpret_cast<const Slot*>(slot(rank, seq));
  if (s->head.seq.load(std::memory_order_acquire) != seq) return false;
  *hash = s->head.desc_hash;
  return true;
}

const OpDesc& SharedLane::desc(int rank, uint64_t seq) const {
  return reinterpret_cast<const Slot*>(slot(rank, seq))->desc;
}

const uint8_t* SharedLane::data(int rank, uint64_t seq, size_t bytes) const {
  const auto* s = reinterpret_cast<const Slot*>(slot(rank, seq));
  return bytes > kLaneInlineBytes ? s->data : s->head.inline_data;
}

uint8_t* SharedLane::bulk_stage(int rank) const {
  return map_.data() + stages_off(nranks_) + stage_bytes(nranks_, bulk_piece_) * static_cast<size_t>(rank);
}

uint8_t* SharedLane::bulk_result(int rank) const {
  return map_.data() + results_off(nranks_, bulk_piece_) + bulk_piece_ * static_cast<size_t>(rank);
}

void SharedLane::bulk_signal(int rank, uint64_t step) {
  auto* f = reinterpret_cast<BulkFlag*>(map_.data() + flags_off(nranks_)) + rank;
  f->step.store(step, std::memory_order_release);
}

bool SharedLane::bulk_reached(int rank, uint64_t step) const {
  const auto* f = reinterpret_cast<const BulkFlag*>(map_.data() + flags_off(nranks_)) + rank;
  return f->step.load(std::memory_order_acquire) >= step;
}

}  // namespace zcx::coll
