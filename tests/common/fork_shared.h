// Memory that forked ranks share with the test process: one anonymous MAP_SHARED mapping of
// `n` value-initialised T (boards of connection handles, counters, results), unmapped when
// the owner goes. T must not need its destructor run.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <type_traits>

namespace zcx::test {

template <class T>
class ForkShared {
  static_assert(std::is_trivially_destructible_v<T>, "unmapped without destructors");

 public:
  explicit ForkShared(size_t n = 1) : n_(n) {
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    data_ = static_cast<T*>(p);
    for (size_t i = 0; i < n_; ++i) new (data_ + i) T{};
  }
  ~ForkShared() {
    if (data_ != nullptr) munmap(data_, bytes());
  }
  ForkShared(const ForkShared&) = delete;
  ForkShared& operator=(const ForkShared&) = delete;

  bool ok() const { return data_ != nullptr; }
  T* get() const { return data_; }
  T* operator->() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  size_t bytes() const { return sizeof(T) * n_; }
  size_t n_;
  T* data_ = nullptr;
};

}  // namespace zcx::test
