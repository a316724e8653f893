// Multi-process conformance of the shm provider: 2 and 4 forked ranks in a full mesh,
// sizes 0 B to 256 MiB with every byte verified, grouped receives, and 256+ requests in
// flight per connection. Both large-message paths (pipeline, CMA) are run.
#include "common/config.h"
#include "shm_fork_util.h"

#include <ostream>
#include <string>
#include <vector>

namespace zcx::shm_test {
namespace {

uint32_t seed_of(int src, int dst, size_t size, int k) {
  return static_cast<uint32_t>(src * 131 + dst * 17 + size * 7 + k);
}

// One round: every rank sends `count` messages of `size` to every peer; receives are
// grouped `group` at a time with tags in reverse order.
int exchange(Board* b, int rank, int n, Mesh& m, size_t size, int count, int group) {
  std::vector<std::vector<uint8_t>> src, dst;
  std::vector<void*> reqs;
  std::vector<int> dst_peer;
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    for (int k = 0; k < count; k += group) {
      void* bufs[kMaxRanks];
      size_t caps[kMaxRanks];
      int tags[kMaxRanks];
      for (int g = 0; g < group; ++g) {
        dst.emplace_back(size, 0);
        bufs[g] = dst.back().data();
        caps[g] = size;
        tags[g] = group - 1 - g;
      }
      reqs.push_back(nullptr);
      if (ops()->irecv(m.rc[j], group, bufs, caps, tags, nullptr, &reqs.back()) != ZCX_SUCCESS ||
          reqs.back() == nullptr)
        return record(b, rank, "irecv"), 1;
    }
  }
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    for (int k = 0; k < count; ++k) {
      src.emplace_back(size);
      fill_pattern(src.back(), seed_of(rank, j, size, k));
      reqs.push_back(nullptr);
      if (ops()->isend(m.sc[j], src.back().data(), size, k % group, nullptr, &reqs.back()) !=
              ZCX_SUCCESS || reqs.back() == nullptr)
        return record(b, rank, "isend"), 1;
    }
  }
  if (wait_all(reqs, nullptr, 100000) != ZCX_SUCCESS) return record(b, rank, "transfer"), 1;
  size_t idx = 0;
  std::vector<uint8_t> expect(size);
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    for (int k = 0; k < count; k += group)
      for (int g = 0; g < group; ++g) {
        // buffer g carries tag group-1-g, i.e. message k + (group-1-g) of this group
        fill_pattern(expect, seed_of(j, rank, size, k + group - 1 - g));
        if (first_diff(expect, dst[idx++], size) != -1)
          return record(b, rank, "data mismatch from rank " + std::to_string(j) + " size " +
                                     std::to_string(size)), 1;
      }
  }
  return 0;
}

struct Case {
  int nranks;
  const char* large;
  std::vector<size_t> sizes;
};

// What gtest prints for a case (and ctest's test names carry), rather than its bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.nranks << " ranks, ZCX_SHM_LARGE=" << c.large << ", " << c.sizes.size() << " sizes";
}

class ShmMultiProc : public ::testing::TestWithParam<Case> {};

TEST_P(ShmMultiProc, SizesGroupsAndManyInFlight) {
  const Case& c = GetParam();
  config::ScopedOverride mode("ZCX_SHM_LARGE", c.large);
  SharedBoard b;
  ASSERT_NE(b.get(), nullptr);
  auto rank_fn = [&](int rank) {
    Rank self(rank, 0xfeed, c.nranks);
    Mesh m;
    if (self.ctx == nullptr || !mesh_connect(b.get(), rank, c.nranks, self.ctx, &m)) return 1;
    for (size_t size : c.sizes)
      if (exchange(b.get(), rank, c.nranks, m, size, 1, 1) != 0) return 1;
    if (exchange(b.get(), rank, c.nranks, m, 5000, 8, 4) != 0) return 1;   // grouped
    if (exchange(b.get(), rank, c.nranks, m, 64, 256, 1) != 0) return 1;   // 256 in flight
    return 0;
  };
  int failed = test::fork_ranks(c.nranks, rank_fn, 110000);
  std::string errors;
  for (int r = 0; r < c.nranks; ++r) errors += b->error[r], errors += "\n";
  EXPECT_EQ(failed, 0) << errors;
}

const size_t kMiB = 1 << 20;
INSTANTIATE_TEST_SUITE_P(
    Ranks, ShmMultiProc,
    ::testing::Values(
        Case{2, "pipeline", {0, 1, 8, 4064, 4065, 65536, kMiB + 1, 64 * kMiB + 3, 256 * kMiB}},
        Case{2, "cma", {4065, kMiB + 1, 64 * kMiB + 3, 256 * kMiB}},
        Case{4, "pipeline", {0, 8, 4096, 65536, kMiB + 1, 16 * kMiB}},
        Case{4, "cma", {65536, kMiB + 1, 16 * kMiB}}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return "np" + std::to_string(i.param.nranks) + "_" + i.param.large;
    });

}  // namespace
}  // namespace zcx::shm_test
