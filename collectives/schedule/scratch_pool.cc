// The scratch pool.
#include "schedule/scratch_pool.h"

#include <algorithm>
#include <new>

namespace zcx::coll {
namespace {

constexpr std::align_val_t kAlign{64};

uint8_t* alloc_block(size_t bytes) {
  return static_cast<uint8_t*>(::operator new(bytes ? bytes : 1, kAlign));
}
void free_block(uint8_t* p) { ::operator delete(p, kAlign); }

}  // namespace

ScratchPool::~ScratchPool() {
  for (Block& b : free_) release(b.p);
}

uint8_t* ScratchPool::alloc(size_t bytes) const {
  return memory_.alloc ? memory_.alloc(bytes ? bytes : 1) : alloc_block(bytes);
}

void ScratchPool::release(uint8_t* p) const {
  if (memory_.free) memory_.free(p);
  else free_block(p);
}

uint8_t* ScratchPool::take(size_t bytes, size_t* cap) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->cap >= bytes && (best == free_.end() || it->cap < best->cap)) best = it;
    if (best != free_.end()) {
      uint8_t* p = best->p;
      *cap = best->cap;
      free_.erase(best);
      return p;
    }
  }
  *cap = bytes;
  return alloc(bytes);
}

void ScratchPool::give(uint8_t* block, size_t cap) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back({block, cap});
  if (free_.size() <= kKeep || memory_.keep_all) return;
  auto smallest = std::min_element(free_.begin(), free_.end(),
                                   [](const Block& a, const Block& b) { return a.cap < b.cap; });
  release(smallest->p);
  free_.erase(smallest);
}

size_t ScratchPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0;
  for (const Block& b : free_) total += b.cap;
  return total;
}

ScratchBlock::ScratchBlock(std::shared_ptr<ScratchPool> pool, size_t bytes)
    : pool_(std::move(pool)) {
  if (pool_) p_ = pool_->take(bytes, &cap_);
  else p_ = alloc_block(bytes), cap_ = bytes;
}

ScratchBlock::ScratchBlock(ScratchBlock&& o) noexcept
    : pool_(std::move(o.pool_)), p_(o.p_), cap_(o.cap_) {
  o.p_ = nullptr;
}

ScratchBlock::~ScratchBlock() {
  if (!p_) return;
  if (pool_) pool_->give(p_, cap_);
  else free_block(p_);
}

}  // namespace zcx::coll
