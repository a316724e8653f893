// What both cuda_ipc test files share (cuda_ipc_test.cc, cuda_ipc_fault_test.cc): the byte
// pattern every transfer carries, and a pair of forked ranks connected over cuda_ipc whose
// board reports become test failures.
#pragma once

#include "cuda_ipc_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace zcx::gpu_test {

inline uint8_t pattern(int src, int dst, size_t size, int k, size_t i) {
  return static_cast<uint8_t>(src * 131 + dst * 17 + size * 7 + k * 29 + i * 13 + (i >> 9));
}

// Makes *v the bytes message k of `size` from src to dst carries. Stored eight at a time:
// messages reach 64 MiB, and under ThreadSanitizer each store is checked; a caller that makes
// many keeps one vector, since a fresh one's pages fault in again every time.
inline void fill_expected(std::vector<uint8_t>* v, int src, int dst, size_t size, int k) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "byte j of a word is bits 8j..8j+7");
  v->resize(size);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word = 0;
    for (size_t j = 0; j < 8; ++j) word |= uint64_t{pattern(src, dst, size, k, i + j)} << (8 * j);
    std::memcpy(v->data() + i, &word, sizeof word);
  }
  for (; i < size; ++i) (*v)[i] = pattern(src, dst, size, k, i);
}
inline std::vector<uint8_t> expected(int src, int dst, size_t size, int k) {
  std::vector<uint8_t> v;
  fill_expected(&v, src, dst, size, k);
  return v;
}

// Runs role(board, rank, mesh) in 2 forked ranks connected over cuda_ipc on GPU 0; what
// they report on the board becomes test failures.
inline void run_connected_pair(const std::function<int(Board*, int, Mesh&)>& role, int ms) {
  test::ForkShared<Board> board;
  ASSERT_TRUE(board.ok());
  Board* b = board.get();
  int failed = test::fork_ranks(2, [&](int r) {
    if (cuda_device_count(nullptr) <= 0 || cuda_shim()->set_device(0) != cudaSuccess)
      return fail(b, r, "CUDA");
    Mesh m;
    if (!mesh_connect(b, r, 2, 0, &m)) return 1;
    return role(b, r, m);
  }, ms);
  for (int r = 0; r < 2; ++r)
    if (b->error[r][0]) ADD_FAILURE() << b->error[r];
  EXPECT_EQ(failed, 0);
}

}  // namespace zcx::gpu_test
