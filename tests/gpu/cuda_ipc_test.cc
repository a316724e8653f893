// Multi-process conformance of the cuda_ipc provider: 2 and 4 forked ranks sharing the
// GPU(s) in a full mesh, device buffers from cudaMalloc (legacy IPC handles), from
// cuMemCreate (POSIX-fd VMM handles), from 2 MiB cuMem segments mapped back to back
// (expandable segments: one fd per segment a buffer covers) and from cuMemCreate without the
// POSIX-fd type (through host memory), sizes 0 B to 64 MiB, several messages per peer in
// flight, every byte verified on the host; how buffers are exported, how the importer's cache
// treats a freed and reused range, and that steady traffic creates no events. Skips, with the
// reason, where there is no GPU. A peer that breaks the protocol: cuda_ipc_fault_test.cc.
#include "cuda_ipc/cuda_ipc.h"
#include "cuda_ipc_pair.h"
#include "gpu_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace zcx::gpu_test {
namespace {

constexpr size_t kSizes[] = {0, 1, 4093, size_t(1) << 20, size_t(64) << 20};
constexpr int kPerPeer = 3;

struct Transfer {
  std::unique_ptr<DeviceBuffer> buf;
  int peer = 0, k = 0;
};

// Posts every receive and send of one size, waits, and verifies what arrived.
int round_trip(Board* b, int rank, int n, int dev, Alloc alloc, Mesh& m, size_t size) {
  const CudaApi* api = cuda_shim();
  std::vector<Transfer> recvs, sends;
  std::vector<void*> reqs;
  std::vector<uint8_t> want, host;  // want: each message's bytes in turn, in one vector
  for (int j = 0; j < n; ++j)
    for (int k = 0; j != rank && k < kPerPeer; ++k) {
      recvs.push_back({std::make_unique<DeviceBuffer>(alloc, dev, size), j, k});
      sends.push_back({std::make_unique<DeviceBuffer>(alloc, dev, size), j, k});
      if (!recvs.back().buf->ok() || !sends.back().buf->ok()) return fail(b, rank, "alloc");
      fill_expected(&want, rank, j, size, k);
      if (size && api->copy(sends.back().buf->data(), want.data(), size, cudaMemcpyHostToDevice))
        return fail(b, rank, "fill");
    }
  for (Transfer& t : recvs) {
    void* data = t.buf->data();
    size_t cap = size;
    reqs.push_back(nullptr);
    if (ipc_ops()->irecv(m.rc[t.peer], 1, &data, &cap, nullptr, nullptr, &reqs.back()) ||
        reqs.back() == nullptr)
      return fail(b, rank, "irecv");
  }
  for (Transfer& t : sends) {
    reqs.push_back(nullptr);
    if (ipc_ops()->isend(m.sc[t.peer], t.buf->data(), size, 0, nullptr, &reqs.back()) ||
        reqs.back() == nullptr)
      return fail(b, rank, "isend");
  }
  std::vector<size_t> got;
  if (!wait_all(reqs, &got)) return fail(b, rank, "transfer of " + std::to_string(size));
  host.resize(size);
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (got[i] != size) return fail(b, rank, "received size " + std::to_string(got[i]));
    if (size && api->copy(host.data(), recvs[i].buf->data(), size, cudaMemcpyDeviceToHost))
      return fail(b, rank, "read back");
    fill_expected(&want, recvs[i].peer, rank, size, recvs[i].k);
    if (host != want)
      return fail(b, rank, "data from rank " + std::to_string(recvs[i].peer) + " differs");
  }
  return 0;
}

int rank_main(Board* b, int rank, int n, Alloc alloc) {
  int ndev = 0;
  if (cuda_device_count(nullptr) <= 0) return fail(b, rank, "no device in the child");
  (void)cuda_shim()->get_device_count(&ndev);
  int dev = rank % ndev;
  if (cuda_shim()->set_device(dev) != cudaSuccess) return fail(b, rank, "cudaSetDevice");
  Mesh m;
  if (!mesh_connect(b, rank, n, dev, &m)) return 1;
  int gen = 0;
  for (size_t size : kSizes) {
    if (round_trip(b, rank, n, dev, alloc, m, size) != 0) return 1;
    // Nobody frees buffers a peer may still be copying into before everyone is done.
    if (!board_barrier(b, n, ++gen)) return fail(b, rank, "barrier");
  }
  return 0;
}

class CudaIpcTest : public ::testing::TestWithParam<std::tuple<int, Alloc>> {};

TEST_P(CudaIpcTest, MeshExchangeVerified) {
  ZCX_REQUIRE_GPUS(1);
  ASSERT_NE(ipc_ops(), nullptr) << "the cuda_ipc provider is not built";
  int n = std::get<0>(GetParam());
  Alloc alloc = std::get<1>(GetParam());
  test::ForkShared<Board> board;
  ASSERT_TRUE(board.ok());
  Board* b = board.get();
  int failed = test::fork_ranks(n, [&](int r) { return rank_main(b, r, n, alloc); }, 110000);
  for (int r = 0; r < n; ++r)
    if (b->error[r][0]) ADD_FAILURE() << b->error[r];
  EXPECT_EQ(failed, 0);
}

std::string mesh_name(const ::testing::TestParamInfo<std::tuple<int, Alloc>>& info) {
  return std::to_string(std::get<0>(info.param)) + "ranks_" + alloc_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    RanksAndAllocators, CudaIpcTest,
    ::testing::Combine(::testing::Values(2, 4),
                       ::testing::Values(Alloc::kCudaMalloc, Alloc::kVmm, Alloc::kVmmSegments,
                                         Alloc::kVmmNoFd)),
    mesh_name);

// Without a GPU the provider still loads, reports 0 devices and refuses a device it does not
// have. Runs in a forked child so this process never initialises CUDA before other tests fork.
TEST(CudaIpcAnyHost, ReportsDevicesAndRejectsMissingDevice) {
  ASSERT_NE(ipc_ops(), nullptr) << "the cuda_ipc provider is not built";
  test::ForkShared<Board> board;
  ASSERT_TRUE(board.ok());
  Board* b = board.get();
  int failed = test::fork_ranks(1, [&](int) {
    const zcx_provider_ops_t* ops = ipc_ops();
    zcx_provider_init_t self{};
    self.size = sizeof self;
    void* ctx = nullptr;
    if (ops->init(&self, &ctx) != ZCX_SUCCESS) return fail(b, 0, "init");
    int ndev = -1;
    if (ops->devices(ctx, &ndev) != ZCX_SUCCESS || ndev < 0) return fail(b, 0, "devices");
    uint8_t handle[ZCX_HANDLE_BYTES];
    void* lc = nullptr;
    if (ops->listen(ctx, ndev, handle, &lc) != ZCX_ERR_INVALID_ARG)
      return fail(b, 0, "listen on a missing device was accepted");
    return ops->finalize(ctx) == ZCX_SUCCESS ? 0 : fail(b, 0, "finalize");
  }, 30000);
  if (b->error[0][0]) ADD_FAILURE() << b->error[0];
  EXPECT_EQ(failed, 0);
}

// A receive buffer's legacy IPC handle is made once per allocation: exporting the same
// cudaMalloc buffer (and one inside it) again reuses it (the simulated runtime counts
// cudaIpcGetMemHandle calls; a real one only gets the handles compared), and a new
// allocation gets its own. In a forked child, as above.
TEST(CudaIpcExport, cudamalloc_HandleMadeOncePerAllocation) {
  ZCX_REQUIRE_GPUS(1);
  test::ForkShared<Board> board;
  ASSERT_TRUE(board.ok());
  Board* b = board.get();
  int failed = test::fork_ranks(1, [&](int) {
    std::string why;
    const CudaApi* api = cuda_shim_load(&why);
    if (api == nullptr || api->set_device(0) != cudaSuccess) return fail(b, 0, "CUDA");
    FakeCounter made = fake_counter("fake_cuda_ipc_exports");
    const long before = made ? made() : 0;
    cuda_ipc::PostedBuffer p1, p2, p3;
    auto a = std::make_unique<DeviceBuffer>(Alloc::kCudaMalloc, 0, 1 << 20);
    if (!a->ok()) return fail(b, 0, "cudaMalloc");
    if (!ok(cuda_ipc::export_buffer(a->data(), 1, &p1)) ||
        !ok(cuda_ipc::export_buffer(a->data() + 4096, 1, &p2)))
      return fail(b, 0, "export");
    const cuda_ipc::Export &e1 = p1.pieces.at(0), &e2 = p2.pieces.at(0);
    if (std::memcmp(e1.legacy, e2.legacy, sizeof e1.legacy) != 0 || e2.offset != 4096)
      return fail(b, 0, "the second export differs from the first");
    if (made && made() - before != 1) return fail(b, 0, "cudaIpcGetMemHandle called again");
    const uint64_t first_id = e1.buffer_id;
    a.reset();
    a = std::make_unique<DeviceBuffer>(Alloc::kCudaMalloc, 0, 1 << 20);
    if (!a->ok() || !ok(cuda_ipc::export_buffer(a->data(), 1, &p3)))
      return fail(b, 0, "export 3");
    if (p3.pieces.at(0).buffer_id == first_id)
      return fail(b, 0, "a new allocation kept the buffer id");
    if (made && made() - before != 2) return fail(b, 0, "a new allocation reused an old handle");
    return 0;
  }, 30000);
  if (b->error[0][0]) ADD_FAILURE() << b->error[0];
  EXPECT_EQ(failed, 0);
}

// What export_buffer makes of a buffer in pieces: kinds, offsets and descriptors.
bool exported_as(const cuda_ipc::PostedBuffer& p, cuda_ipc::ExportKind kind, size_t pieces,
                 size_t fds) {
  if (p.pieces.size() != pieces || p.fds.size() != fds) return false;
  for (const cuda_ipc::Export& e : p.pieces)
    if (e.kind != kind) return false;
  return true;
}

// A cuMem receive buffer is exported as its allocation's POSIX fd, taking no lasting
// reference (the simulated runtime counts them); one over allocations mapped back to back as
// one fd per allocation (the first from the buffer's offset), up to kMaxPieces of them, and
// as "host" beyond that, or in an allocation made without the POSIX-fd handle type.
TEST(CudaIpcExport, VmmBuffersExportAsFdsPerAllocation) {
  ZCX_REQUIRE_GPUS(1);
  test::ForkShared<Board> board;
  ASSERT_TRUE(board.ok());
  Board* b = board.get();
  int failed = test::fork_ranks(1, [&](int) {
    using cuda_ipc::ExportKind;
    std::string why;
    const CudaApi* api = cuda_shim_load(&why);
    if (api == nullptr || api->set_device(0) != cudaSuccess) return fail(b, 0, "CUDA");
    FakeCounter refs = fake_counter("fake_cuda_vmm_references");
    const size_t seg = vmm_granularity(0);  // DeviceBuffer's segment
    if (seg == 0) return fail(b, 0, "cuMemGetAllocationGranularity");
    const size_t many = cuda_ipc::kMaxPieces + 1;
    DeviceBuffer whole(Alloc::kVmm, 0, 1 << 20), split(Alloc::kVmmSegments, 0, many * seg);
    DeviceBuffer closed(Alloc::kVmmNoFd, 0, 4096);
    if (!whole.ok() || !split.ok() || !closed.ok()) return fail(b, 0, "cuMemCreate");
    const long before = refs ? refs() : 0;
    cuda_ipc::PostedBuffer p;
    if (!ok(cuda_ipc::export_buffer(whole.data() + 64, 4096, &p)) ||
        !exported_as(p, ExportKind::kVmm, 1, 1) || p.pieces[0].offset != 64)
      return fail(b, 0, "the VMM export: " + std::string(last_error()));
    if (!ok(cuda_ipc::export_buffer(split.data() + seg - 8, seg + 16, &p)) ||
        !exported_as(p, ExportKind::kVmm, 3, 3) || p.pieces[0].offset != seg - 8 ||
        p.pieces[1].offset != 0 || p.pieces[2].size != seg)
      return fail(b, 0, "a buffer over three segments was not exported in three pieces");
    if (!ok(cuda_ipc::export_buffer(split.data(), many * seg, &p)) ||
        !exported_as(p, ExportKind::kHost, 1, 0))
      return fail(b, 0, "a buffer over more than kMaxPieces segments was not exported as host");
    if (!ok(cuda_ipc::export_buffer(closed.data(), 4096, &p)) ||
        !exported_as(p, ExportKind::kHost, 1, 0))
      return fail(b, 0, "a buffer without the POSIX-fd handle type was not exported as host");
    p = {};
    if (refs && refs() != before) return fail(b, 0, "the exports kept a handle reference");
    return 0;
  }, 30000);
  if (b->error[0][0]) ADD_FAILURE() << b->error[0];
  EXPECT_EQ(failed, 0);
}

constexpr size_t kReuseBytes = size_t(1) << 20;

// One message of kReuseBytes from rank 0 into `dst` on rank 1, verified there.
int one_message(Board* b, int rank, Mesh& m, uint8_t* dst, int k) {
  const CudaApi* api = cuda_shim();
  std::vector<uint8_t> want = expected(0, 1, kReuseBytes, k);
  std::vector<void*> reqs(1, nullptr);
  if (rank == 0) {
    DeviceBuffer src(Alloc::kCudaMalloc, 0, kReuseBytes);
    if (!src.ok() || api->copy(src.data(), want.data(), kReuseBytes, cudaMemcpyHostToDevice) ||
        ipc_ops()->isend(m.sc[1], src.data(), kReuseBytes, 0, nullptr, &reqs[0]) ||
        !wait_all(reqs, nullptr, 30000))
      return fail(b, 0, "send " + std::to_string(k));
    return 0;
  }
  void* data = dst;
  size_t cap = kReuseBytes;
  std::vector<uint8_t> host(kReuseBytes);
  if (ipc_ops()->irecv(m.rc[0], 1, &data, &cap, nullptr, nullptr, &reqs[0]) ||
      !wait_all(reqs, nullptr, 30000) ||
      api->copy(host.data(), dst, kReuseBytes, cudaMemcpyDeviceToHost) || host != want)
    return fail(b, 1, "receive " + std::to_string(k) + " (or its data)");
  return 0;
}

// Rank 1 receives into A, frees it and receives into B, which the allocator placed where A
// was. Rank 0, whose cache still maps A, checks against the simulated runtime that its first
// open of B was refused and that A's mapping was closed for it.
int reuse_rank(Board* b, int rank, Mesh& m) {
  FakeCounter refused = fake_counter("fake_cuda_ipc_refused_opens");
  FakeCounter imports = fake_counter("fake_cuda_ipc_open_imports");
  if (rank == 0) {
    if (one_message(b, 0, m, nullptr, 0) || one_message(b, 0, m, nullptr, 1)) return 1;
    if (refused != nullptr && (refused() != 1 || imports() != 1))
      return fail(b, 0, "refused opens " + std::to_string(refused()) + ", open imports " +
                            std::to_string(imports()) + " (want 1 and 1)");
  } else {
    auto a = std::make_unique<DeviceBuffer>(Alloc::kCudaMalloc, 0, kReuseBytes);
    if (!a->ok() || one_message(b, 1, m, a->data(), 0)) return 1;
    const uint8_t* at = a->data();
    a.reset();
    DeviceBuffer fresh(Alloc::kCudaMalloc, 0, kReuseBytes);
    if (refused != nullptr && fresh.data() != at)
      return fail(b, 1, "the simulated allocator did not give A's range back");
    if (!fresh.ok() || one_message(b, 1, m, fresh.data(), 1)) return 1;
  }
  return board_barrier(b, 2, 1) ? 0 : fail(b, rank, "barrier");
}

// A receiver that frees a buffer and gets its range back for the next one: the sender's
// cache holds the old mapping (unused), which the driver may refuse to open over
// (cudaErrorAlreadyMapped, modelled by the simulated runtime); the cache closes it and
// opens again, and the message arrives intact.
TEST(CudaIpcCache, cudamalloc_AFreedAndReusedRangeOpensAgain) {
  ZCX_REQUIRE_GPUS(1);
  run_connected_pair(reuse_rank, 60000);
}

// Messages one after another into one buffer: after the first, the sender creates no CUDA
// event (each completed send's event goes back to its comm). The simulated runtime counts
// event creations; a real one only gets the data checked.
int steady_rank(Board* b, int rank, Mesh& m) {
  FakeCounter created = fake_counter("fake_cuda_events_created");
  DeviceBuffer dst(Alloc::kCudaMalloc, 0, rank == 1 ? kReuseBytes : 0);
  long after_first = 0;
  for (int k = 0; k < 8; ++k) {
    if (!dst.ok() || one_message(b, rank, m, dst.data(), k)) return 1;
    if (k == 0 && created != nullptr) after_first = created();
  }
  if (created != nullptr && created() != after_first)
    return fail(b, rank, std::to_string(created() - after_first) + " events created after "
                "the first message (want 0)");
  return board_barrier(b, 2, 1) ? 0 : fail(b, rank, "barrier");
}

TEST(CudaIpcEvents, cudamalloc_MessagesAfterTheFirstCreateNoEvents) {
  ZCX_REQUIRE_GPUS(1);
  run_connected_pair(steady_rank, 60000);
}

}  // namespace
}  // namespace zcx::gpu_test
