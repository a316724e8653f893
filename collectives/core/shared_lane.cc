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

constexpr size_t kSlotStride = sizeof(Slot);
static_assert(kSlotStride % kLine == 0, "slots stay line-aligned");

size_t announce_off() { return sizeof(LaneHeader); }
size_t slots_off(int nranks) {
  return (announce_off() + sizeof(Announce) * static_cast<size_t>(nranks) + 4095) / 4096 * 4096;
}
size_t total_bytes(int nranks) { return slots_off(nranks) + kSlotStride * 2 * nranks; }

}  // namespace

Status SharedLane::map_and_locate(int fd, int nranks) {
  ZCX_TRY(map_.map(fd, total_bytes(nranks)));
  nranks_ = nranks;
  return Status::kSuccess;
}

Status SharedLane::create(int nranks, std::unique_ptr<SharedLane>* out) {
  if (nranks < 2 || nranks > kSharedMaxRanks)
    return set_error(Status::kInvalidArg, kLogColl, "shared lane: %d ranks (2..%d)", nranks,
                     kSharedMaxRanks);
  std::unique_ptr<SharedLane> lane(new SharedLane());
  ZCX_TRY(memfd_create_reserved(total_bytes(nranks), "a communicator's shared lane", kLogColl,
                                &lane->fd_));
  ZCX_TRY(lane->map_and_locate(lane->fd_.get(), nranks));
  auto* h = reinterpret_cast<LaneHeader*>(lane->map_.data());  // memfd pages start zeroed
  lane->token_ = random_u64() | 1;
  h->token = lane->token_;
  h->nranks = static_cast<uint32_t>(nranks);
  h->slot_bytes = static_cast<uint32_t>(kSharedMaxBytes);
  h->magic = kLaneMagic;
  *out = std::move(lane);
  return Status::kSuccess;
}

Status SharedLane::attach(int owner_pid, int owner_fd, uint64_t token, int nranks,
                          std::unique_ptr<SharedLane>* out) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", owner_pid, owner_fd);
  UniqueFd fd(open(path, O_RDWR | O_CLOEXEC));
  if (!fd.valid())
    return set_error(Status::kSystem, kLogColl, "shared lane: cannot open rank 0's segment "
                     "(%s): %s", path, strerror(errno));
  ZCX_TRY(memfd_check(fd.get(), total_bytes(nranks), kLogColl));
  std::unique_ptr<SharedLane> lane(new SharedLane());
  ZCX_TRY(lane->map_and_locate(fd.get(), nranks));
  const auto* h = reinterpret_cast<const LaneHeader*>(lane->map_.data());
  if (h->magic != kLaneMagic || h->token != token || h->nranks != static_cast<uint32_t>(nranks) ||
      h->slot_bytes != kSharedMaxBytes)
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

}  // namespace zcx::coll
