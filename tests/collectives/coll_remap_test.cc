// A buffer freed and mapped again at the same address between two calls, as an allocator
// does: the second call must move the new pages' bytes. A provider that registers memory
// (ib) pins the pages it was given; a registration kept from the first call would still name
// the old pages, so the receiver's data would land there (the new buffer stays as it was)
// and the sender would send what the old pages held, while both calls report success.
// 2 forked ranks per provider: an allreduce of 1 MiB, then zcx_send/zcx_recv of 1 MiB and
// of 4 KiB.
#include "process_ranks.h"
#include "base/registry.h"

#include <gtest/gtest.h>
#include <zcx/coll.h>
#include <zcx/zcx.h>

#include <dirent.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace zcx::test {
namespace {

constexpr size_t kBytes = size_t{1} << 20;

// The same kBytes of address space with fresh pages: unmapped, then mapped there again.
bool remap(void* at) {
  if (munmap(at, kBytes) != 0) return false;
  void* p = mmap(at, kBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  return p == at;
}

// Reports "BAD <what>: byte <i> is <v>, want <w>" for the first wrong byte of the n.
bool all_bytes(const uint8_t* b, size_t n, uint8_t want, int fd, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != want) {
      dprintf(fd, "BAD %s: byte %zu is 0x%02x, want 0x%02x\n", what, i, b[i], want);
      return false;
    }
  }
  return true;
}

// Rank 0 sends 0xa0 + round, rank 1 receives into a buffer it cleared; between the rounds
// both remap their buffer. 1 MiB (registered per transfer over ib), then 4 KiB (copied
// through the context's own registered blocks).
bool p2p_rounds(zcx_context_t ctx, int rank, uint8_t* buf, int fd) {
  zcx_endpoint_t ep = nullptr;
  if (zcx_endpoint_get(ctx, 1 - rank, &ep) != ZCX_SUCCESS) return false;
  for (size_t n : {kBytes, size_t{4096}}) {
    for (int round = 0; round < 2; ++round) {
      const auto value = static_cast<uint8_t>(0xa0 + round);
      size_t got = 0;
      memset(buf, rank == 0 ? value : 0, kBytes);
      zcx_status_t st = rank == 0 ? zcx_send(ep, buf, n) : zcx_recv(ep, buf, n, &got);
      if (st != ZCX_SUCCESS) return dprintf(fd, "BAD p2p: %s\n", zcx_get_last_error()), false;
      const std::string what = "p2p of " + std::to_string(n) + (round ? " after remap" : "");
      if (rank == 1 && (got != n || !all_bytes(buf, n, value, fd, what.c_str()))) return false;
      if (zcx_barrier(ctx) != ZCX_SUCCESS || !remap(buf)) return false;
    }
  }
  return true;
}

// int8 sums of (rank + 1) * (round + 1): 3 then 6 in every byte.
bool allreduce_rounds(zcx_comm_t comm, int rank, uint8_t* buf, int fd) {
  for (int round = 0; round < 2; ++round) {
    memset(buf, (rank + 1) * (round + 1), kBytes);
    if (zcx_allreduce(buf, buf, kBytes, ZCX_INT8, ZCX_SUM, comm, nullptr) != ZCX_SUCCESS)
      return dprintf(fd, "BAD allreduce: %s\n", zcx_get_last_error()), false;
    if (!all_bytes(buf, kBytes, static_cast<uint8_t>(3 * (round + 1)), fd,
                   round ? "allreduce after remap" : "allreduce"))
      return false;
    if (!remap(buf)) return false;
  }
  return true;
}

int remap_rank(int rank, int fd, const char* provider) {
  setenv("ZCX_PROVIDERS", provider, 1);
  setenv("ZCX_SOCKET_IFNAME", "lo", 1);
  setenv("ZCX_COLL_SHARED_LANE", "0", 1);  // the allreduce goes over the provider, not the
  setenv("ZCX_COLL_SHARED_BULK", "0", 1);  // host's shared segments
  setenv("ZCX_ALGO", "allreduce:ring", 1);
  void* mem = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  zcx_context_t ctx = nullptr;
  zcx_comm_t comm = nullptr;
  if (mem == MAP_FAILED || zcx_init_from_env(&ctx) != ZCX_SUCCESS ||
      zcx_comm_init_context(&comm, ctx, nullptr) != ZCX_SUCCESS) {
    dprintf(fd, "BAD init: %s\n", zcx_get_last_error());
    return 2;
  }
  auto* buf = static_cast<uint8_t*>(mem);
  bool good = allreduce_rounds(comm, rank, buf, fd) && p2p_rounds(ctx, rank, buf, fd);
  dprintf(fd, good ? "DONE\n" : "FAILED (last error: %s)\n", zcx_get_last_error());
  good = zcx_comm_destroy(comm) == ZCX_SUCCESS && zcx_finalize(ctx) == ZCX_SUCCESS && good;
  munmap(mem, kBytes);
  return good ? 0 : 1;
}

bool rdma_device_present() {
  DIR* d = opendir("/sys/class/infiniband");
  if (d == nullptr) return false;
  int entries = 0;
  while (dirent* e = readdir(d)) entries += e->d_name[0] != '.';
  closedir(d);
  return entries > 0;
}

class CollRemap : public ::testing::TestWithParam<const char*> {};

TEST_P(CollRemap, TransfersMoveTheNewPagesAfterARemap) {
  const std::string provider = GetParam();
  {
    ScopedEnv only("ZCX_PROVIDERS", provider.c_str());
    if (providers_selected().empty()) GTEST_SKIP() << provider << " is not built in this tree";
  }
  if (provider == "ib" && !rdma_device_present()) {
    std::printf("[  SKIPPED ] no RDMA device (/sys/class/infiniband is empty): the ib case "
                "runs in the Soft-RoCE guest (ctest -L rdma)\n");
    GTEST_SKIP() << "no RDMA device";
  }
  auto results = run_rank_processes(
      2, 60000, [&](int rank, int fd) { return remap_rank(rank, fd, provider.c_str()); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << results[r].report;
    EXPECT_NE(results[r].report.find("DONE"), std::string::npos) << results[r].report;
  }
}

INSTANTIATE_TEST_SUITE_P(Providers, CollRemap, ::testing::Values("tcp", "shm", "ib"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace zcx::test
