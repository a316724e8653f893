// Scratch memory for schedules, reused across the operations of a communicator.
//
// A large buffer freed after every operation comes back from the kernel as fresh pages that
// must be faulted in and zeroed: with a new 16 MiB scratch per 32 MiB allreduce, page faults
// and clearing cost more than the reduction. The pool keeps a few freed blocks for the next
// operation. Blocks are uninitialised (schedules write before they read) and 64-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace zcx::coll {

// Where a pool's blocks come from: host memory by default; device memory (cudaMalloc) or
// pinned host memory for stream-ordered GPU operations. alloc throws std::bad_alloc.
struct ScratchMemory {
  std::function<uint8_t*(size_t)> alloc;
  std::function<void(uint8_t*)> free;
  // Keep every block until the pool goes (no kKeep limit). For CUDA memory: cudaFree and
  // cudaFreeHost wait for the whole device, so a free between operations would stall on
  // whatever unrelated work the application has queued.
  bool keep_all = false;
};

class ScratchPool {
 public:
  ScratchPool() = default;
  explicit ScratchPool(ScratchMemory memory) : memory_(std::move(memory)) {}
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // The smallest kept block of at least `bytes`, or a new one. *cap: its capacity.
  uint8_t* take(size_t bytes, size_t* cap);
  // Returns a block; keeps at most kKeep (the largest), frees the rest.
  void give(uint8_t* block, size_t cap);
  size_t kept_bytes() const;

 private:
  static constexpr size_t kKeep = 4;
  struct Block {
    uint8_t* p;
    size_t cap;
  };
  uint8_t* alloc(size_t bytes) const;
  void release(uint8_t* p) const;

  ScratchMemory memory_;  // empty: host memory
  mutable std::mutex mu_;
  std::vector<Block> free_;
};

// Owner of one block: gives it back to its pool (or frees it, without a pool).
class ScratchBlock {
 public:
  ScratchBlock(std::shared_ptr<ScratchPool> pool, size_t bytes);
  ~ScratchBlock();
  ScratchBlock(ScratchBlock&& o) noexcept;
  ScratchBlock& operator=(ScratchBlock&&) = delete;
  ScratchBlock(const ScratchBlock&) = delete;
  ScratchBlock& operator=(const ScratchBlock&) = delete;
  uint8_t* data() const { return p_; }

 private:
  std::shared_ptr<ScratchPool> pool_;
  uint8_t* p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace zcx::coll
