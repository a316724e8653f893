// What both cuda_ipc test files share (cuda_ipc_test.cc, cuda_ipc_fault_test.cc): the byte
// pattern every transfer carries, and a pair of forked ranks connected over cuda_ipc whose
// board reports become test failures.
#pragma once

#include "cuda_ipc_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace zcx::gpu_test {

inline uint8_t pattern(int src, int dst, size_t size, int k, size_t i) {
  return static_cast<uint8_t>(src * 131 + dst * 17 + size * 7 + k * 29 + i * 13 + (i >> 9));
}

// The bytes message k of `size` from src to dst carries.
inline std::vector<uint8_t> expected(int src, int dst, size_t size, int k) {
  std::vector<uint8_t> v(size);
  for (size_t i = 0; i < size; ++i) v[i] = pattern(src, dst, size, k, i);
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
