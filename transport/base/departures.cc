// Departures: one page per rank saying whether it left cleanly (see departures.h).
#include "base/departures.h"

#include "common/log.h"
#include "common/random.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace zcx {
namespace {

constexpr uint64_t kPageMagic = 0x5452415045445a43ull;  // "CZDEPART"
constexpr size_t kPageBytes = 4096;
constexpr uint32_t kLeft = 1;

// The page: written by its owner only; `state` is stored last (release) and read (acquire)
// by peers after they saw the owner's process gone. The activity fields are hints read long
// after they were written (a stall of a second or more): relaxed.
struct Page {
  uint64_t magic;
  uint64_t token;
  std::atomic<uint32_t> state;
  std::atomic<uint64_t> comm;
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> done;
  std::atomic<int64_t> polled_ns;
  std::atomic<uint32_t> failed;
};
static_assert(sizeof(Page) <= kPageBytes && std::atomic<uint32_t>::is_always_lock_free &&
              std::atomic<uint64_t>::is_always_lock_free);

Page* page_of(const Mapping& m) { return reinterpret_cast<Page*>(m.data()); }

}  // namespace

void Departures::open_own() {
  UniqueFd fd;
  Mapping map;
  if (!ok(memfd_create_reserved(kPageBytes, "the departure page", kLogInit, &fd)) ||
      !ok(map.map(fd.get(), kPageBytes))) {
    ZCX_INFO(kLogInit, "no departure page (peers will call this rank dead when it exits): %s",
             last_error());
    return;
  }
  token_ = random_u64();
  Page* p = page_of(map);
  p->magic = kPageMagic;
  p->token = token_;
  p->state.store(0, std::memory_order_release);
  own_fd_ = std::move(fd);
  own_ = std::move(map);
}

void Departures::watch(int rank, int pid, int fd, uint64_t token) {
  if (pid <= 0 || fd < 0) return;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  UniqueFd f(open(path, O_RDONLY | O_CLOEXEC));
  Mapping map;
  if (!f.valid()) {
    ZCX_INFO(kLogInit, "rank %d: cannot open its departure page %s: %s", rank, path,
             errno_text(errno));
    return;
  }
  if (!ok(memfd_check(f.get(), kPageBytes, kLogInit)) || !ok(map.map(f.get(), kPageBytes, false))) {
    ZCX_INFO(kLogInit, "rank %d: its departure page %s is unusable: %s", rank, path, last_error());
    return;
  }
  const Page* p = page_of(map);
  if (p->magic != kPageMagic || p->token != token) {
    ZCX_INFO(kLogInit, "rank %d: %s is not its departure page (another machine with the same "
             "host identity?)", rank, path);
    return;
  }
  peers_[rank] = std::move(map);
}

void Departures::mark_left() {
  if (own_.data() != nullptr) page_of(own_)->state.store(kLeft, std::memory_order_release);
}

void Departures::note_call(uint64_t comm, uint64_t seq) {
  if (own_.data() == nullptr) return;
  Page* p = page_of(own_);
  p->comm.store(comm, std::memory_order_relaxed);
  p->seq.store(seq, std::memory_order_relaxed);
}

void Departures::note_done(uint64_t seq) {
  if (own_.data() != nullptr) page_of(own_)->done.store(seq, std::memory_order_relaxed);
}

void Departures::note_poll(int64_t now_ns) {
  if (own_.data() != nullptr) page_of(own_)->polled_ns.store(now_ns, std::memory_order_relaxed);
}

void Departures::note_failed() {
  if (own_.data() != nullptr) page_of(own_)->failed.store(1, std::memory_order_relaxed);
}

namespace {

void read_activity(const Page* p, Departures::Activity* out) {
  out->comm = p->comm.load(std::memory_order_relaxed);
  out->seq = p->seq.load(std::memory_order_relaxed);
  out->done = p->done.load(std::memory_order_relaxed);
  out->polled_ns = p->polled_ns.load(std::memory_order_relaxed);
  out->failed = p->failed.load(std::memory_order_relaxed) != 0;
}

}  // namespace

bool Departures::activity(int rank, Activity* out) const {
  auto it = peers_.find(rank);
  if (it == peers_.end()) return false;
  read_activity(page_of(it->second), out);
  return true;
}

bool Departures::own_activity(Activity* out) const {
  if (own_.data() == nullptr) return false;
  read_activity(page_of(own_), out);
  return true;
}

bool Departures::left(int rank) const {
  auto it = peers_.find(rank);
  return it != peers_.end() && page_of(it->second)->state.load(std::memory_order_acquire) == kLeft;
}

}  // namespace zcx
