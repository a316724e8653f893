// Multi-process conformance of the cuda_ipc provider: 2 and 4 forked ranks sharing the
// GPU(s) in a full mesh, device buffers from cudaMalloc (legacy IPC handles), from
// cuMemCreate (POSIX-fd VMM handles), from 2 MiB cuMem segments mapped back to back
// (expandable segments: one fd per segment a buffer covers) and from cuMemCreate without the
// POSIX-fd type (through host memory), sizes 0 B to 64 MiB, several messages per peer in
// flight, every byte verified on the host; a receive completed just before its peer closed
// still reports done. Skips, with the reason, where there is no GPU.
#include "common/wire.h"
#include "cuda_ipc/cuda_ipc.h"
#include "cuda_ipc_util.h"
#include "gpu_test_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace zcx::gpu_test {
namespace {

constexpr size_t kSizes[] = {0, 1, 4093, size_t(1) << 20, size_t(64) << 20};
constexpr int kPerPeer = 3;

uint8_t pattern(int src, int dst, size_t size, int k, size_t i) {
  return static_cast<uint8_t>(src * 131 + dst * 17 + size * 7 + k * 29 + i * 13 + (i >> 9));
}

std::vector<uint8_t> expected(int src, int dst, size_t size, int k) {
  std::vector<uint8_t> v(size);
  for (size_t i = 0; i < size; ++i) v[i] = pattern(src, dst, size, k, i);
  return v;
}

struct Transfer {
  std::unique_ptr<DeviceBuffer> buf;
  int peer = 0, k = 0;
};

// Posts every receive and send of one size, waits, and verifies what arrived.
int round_trip(Board* b, int rank, int n, int dev, Alloc alloc, Mesh& m, size_t size) {
  const CudaApi* api = cuda_shim();
  std::vector<Transfer> recvs, sends;
  std::vector<void*> reqs;
  for (int j = 0; j < n; ++j)
    for (int k = 0; j != rank && k < kPerPeer; ++k) {
      recvs.push_back({std::make_unique<DeviceBuffer>(alloc, dev, size), j, k});
      sends.push_back({std::make_unique<DeviceBuffer>(alloc, dev, size), j, k});
      if (!recvs.back().buf->ok() || !sends.back().buf->ok()) return fail(b, rank, "alloc");
      std::vector<uint8_t> src = expected(rank, j, size, k);
      if (size && api->copy(sends.back().buf->data(), src.data(), size, cudaMemcpyHostToDevice))
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
  std::vector<uint8_t> host(size);
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (got[i] != size) return fail(b, rank, "received size " + std::to_string(got[i]));
    if (size && api->copy(host.data(), recvs[i].buf->data(), size, cudaMemcpyDeviceToHost))
      return fail(b, rank, "read back");
    if (host != expected(recvs[i].peer, rank, size, recvs[i].k))
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
  static const char* const kNames[] = {"cudamalloc", "vmm", "vmmsegments", "vmmnofd"};
  return std::to_string(std::get<0>(info.param)) + "ranks_" +
         kNames[static_cast<int>(std::get<1>(info.param))];
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

// Runs role(board, rank, mesh) in 2 forked ranks connected over cuda_ipc on GPU 0; what
// they report on the board becomes test failures.
void run_connected_pair(const std::function<int(Board*, int, Mesh&)>& role, int ms) {
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

// test() on req until it fails or completes, for at most 5 s: the last status.
zcx_status_t test_until_over(void* req, int* done) {
  zcx_status_t st = ZCX_SUCCESS;
  *done = 0;
  for (Deadline dl = Deadline::after_ms(5000); st == ZCX_SUCCESS && !*done && !dl.expired();)
    st = ipc_ops()->test(req, done, nullptr);
  return st;
}

// Forged DATA packets: rank 0 writes one on its control socket in place of a transfer.
enum class BadData { kNoFd, kShortMemfd, kUnsealed, kOverCapacity };
constexpr size_t kWireCap = 4096;

int forge_data(Board* b, Mesh& m, BadData kind) {
  const uint64_t size = kind == BadData::kOverCapacity ? kWireCap + 1 : kWireCap;
  UniqueFd memfd(memfd_create("zcx-test-data", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  const off_t bytes = kind == BadData::kShortMemfd ? 16 : static_cast<off_t>(size);
  if (!memfd.valid() || ftruncate(memfd.get(), bytes) != 0 ||
      (kind != BadData::kUnsealed && fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0))
    return fail(b, 0, "memfd");
  uint8_t buf[32];
  wire::Writer w(buf, sizeof buf);
  w.u32(cuda_ipc::kDataMagic);
  w.u64(0);  // the first receive's seq
  w.u64(size);
  const int sock = static_cast<cuda_ipc::Comm*>(m.sc[1])->sock.get();
  if (!board_barrier(b, 2, 1)) return fail(b, 0, "the receive was never posted");
  if (!ok(cuda_ipc::packet_send(sock, buf, w.size(), kind == BadData::kNoFd ? -1 : memfd.get())))
    return fail(b, 0, "sending the forged DATA");
  return board_barrier(b, 2, 2) ? 0 : fail(b, 0, "barrier");
}

// Rank 1: one receive; the forged DATA must fail it with ZCX_ERR_PROTOCOL naming rank 0.
int refuse_data(Board* b, Mesh& m) {
  DeviceBuffer buf(Alloc::kCudaMalloc, 0, kWireCap);
  void* data = buf.data();
  size_t cap = kWireCap;
  void* req = nullptr;
  if (ipc_ops()->irecv(m.rc[0], 1, &data, &cap, nullptr, nullptr, &req) || req == nullptr)
    return fail(b, 1, "irecv");
  if (!board_barrier(b, 2, 1)) return fail(b, 1, "barrier");
  int done = 0;
  const zcx_status_t st = test_until_over(req, &done);
  const std::string why = last_error();
  if (st != ZCX_ERR_PROTOCOL || why.find("DATA") == std::string::npos ||
      why.find("rank 0") == std::string::npos)
    return fail(b, 1, "the forged DATA ended with " + std::to_string(st) + ": " + why);
  return board_barrier(b, 2, 2) ? 0 : fail(b, 1, "barrier");
}

class CudaIpcWire : public ::testing::TestWithParam<BadData> {};

// Every field of a DATA is checked before use: one without its memfd, with a memfd shorter
// than its size or one that could still shrink, or larger than the receive fails the
// connection, naming the peer.
TEST_P(CudaIpcWire, cudamalloc_MalformedDataFailsTheReceive) {
  ZCX_REQUIRE_GPUS(1);
  const BadData kind = GetParam();
  run_connected_pair([kind](Board* b, int r, Mesh& m) {
    return r == 0 ? forge_data(b, m, kind) : refuse_data(b, m);
  }, 30000);
}

std::string bad_data_name(const ::testing::TestParamInfo<BadData>& info) {
  static const char* const kNames[] = {"NoFd", "ShortMemfd", "Unsealed", "OverCapacity"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Forged, CudaIpcWire,
                         ::testing::Values(BadData::kNoFd, BadData::kShortMemfd,
                                           BadData::kUnsealed, BadData::kOverCapacity),
                         bad_data_name);

// A forged POST of kind VMM whose fd is a plain memfd, not a CUDA allocation: rank 1 writes
// it in place of an irecv's; rank 0's send must fail naming rank 1, and stay failed (no DONE
// for bytes never copied).
int forge_vmm_post(Board* b, Mesh& m) {
  UniqueFd memfd(memfd_create("zcx-test-post", MFD_CLOEXEC));
  if (!memfd.valid() || ftruncate(memfd.get(), 2 << 20) != 0) return fail(b, 1, "memfd");
  uint8_t buf[cuda_ipc::kMaxPacket];
  wire::Writer w(buf, sizeof buf);
  w.u32(cuda_ipc::kPostMagic);
  w.u64(0);        // seq
  w.u64(kWireCap);  // capacity
  w.u32(static_cast<uint32_t>(cuda_ipc::ExportKind::kVmm));
  for (uint64_t v : {uint64_t{0x7f0000000000}, uint64_t{2} << 20, uint64_t{0}, uint64_t{9}})
    w.u64(v);  // base, size, offset, buffer id
  const uint8_t legacy[64] = {};
  w.bytes(legacy, sizeof legacy);
  const int sock = static_cast<cuda_ipc::Comm*>(m.rc[0])->sock.get();
  if (!ok(cuda_ipc::packet_send(sock, buf, w.size(), memfd.get())))
    return fail(b, 1, "sending the forged POST");
  return board_barrier(b, 2, 1) ? 0 : fail(b, 1, "barrier");
}

int refuse_vmm_post(Board* b, Mesh& m) {
  DeviceBuffer src(Alloc::kCudaMalloc, 0, kWireCap);
  void* req = nullptr;
  if (!src.ok() || ipc_ops()->isend(m.sc[1], src.data(), kWireCap, 0, nullptr, &req) || !req)
    return fail(b, 0, "isend");
  int done = 0;
  const zcx_status_t st = test_until_over(req, &done);
  const std::string why = last_error();
  if (st == ZCX_SUCCESS || why.find("rank 1") == std::string::npos)
    return fail(b, 0, "the forged POST ended with " + std::to_string(st) + ": " + why);
  done = 0;
  if (ipc_ops()->test(req, &done, nullptr) == ZCX_SUCCESS || done)
    return fail(b, 0, "the failed send reported success when tested again");
  return board_barrier(b, 2, 1) ? 0 : fail(b, 0, "barrier");
}

TEST(CudaIpcWire, AVmmPostWithAForeignFdFailsTheSend) {
  ZCX_REQUIRE_GPUS(1);
  run_connected_pair([](Board* b, int r, Mesh& m) {
    return r == 1 ? forge_vmm_post(b, m) : refuse_vmm_post(b, m);
  }, 30000);
}

// Rank 0 of DoneBeforeClose: one message into rank 1's first receive, then close.
int done_sender(Board* b, Mesh& m) {
  std::vector<uint8_t> src = expected(0, 1, 4096, 0);
  DeviceBuffer buf(Alloc::kCudaMalloc, 0, src.size());
  if (!buf.ok() || cuda_shim()->copy(buf.data(), src.data(), src.size(), cudaMemcpyHostToDevice))
    return fail(b, 0, "fill");
  if (!board_barrier(b, 2, 1)) return fail(b, 0, "the receives were never posted");
  std::vector<void*> reqs(1, nullptr);
  if (ipc_ops()->isend(m.sc[1], buf.data(), src.size(), 0, nullptr, &reqs[0]) ||
      !wait_all(reqs, nullptr, 30000))
    return fail(b, 0, "send");
  (void)ipc_ops()->close_send(m.sc[1]);  // DONE and then the close wait in rank 1's socket
  m.sc[1] = nullptr;
  if (!board_barrier(b, 2, 2) || !board_barrier(b, 2, 3)) return fail(b, 0, "barrier");
  return 0;
}

// Rank 1: two receives posted; once rank 0 sent one message and closed, the first test()
// reads both the DONE and the close in one progress call.
int done_receiver(Board* b, Mesh& m) {
  DeviceBuffer first(Alloc::kCudaMalloc, 0, 4096), second(Alloc::kCudaMalloc, 0, 4096);
  std::vector<void*> reqs(2, nullptr);
  for (int k = 0; k < 2; ++k) {
    void* data = (k == 0 ? first : second).data();
    size_t cap = 4096;
    if (ipc_ops()->irecv(m.rc[0], 1, &data, &cap, nullptr, nullptr, &reqs[k]) || !reqs[k])
      return fail(b, 1, "irecv");
  }
  if (!board_barrier(b, 2, 1) || !board_barrier(b, 2, 2)) return fail(b, 1, "barrier");
  int done = 0;
  size_t got = 0;
  if (ipc_ops()->test(reqs[0], &done, &got) != ZCX_SUCCESS || !done || got != 4096)
    return fail(b, 1, "the completed receive did not report done");
  std::vector<uint8_t> host(4096);
  if (cuda_shim()->copy(host.data(), first.data(), 4096, cudaMemcpyDeviceToHost) ||
      host != expected(0, 1, 4096, 0))
    return fail(b, 1, "the completed receive's data differs");
  const zcx_status_t st = test_until_over(reqs[1], &done);
  if (st != ZCX_ERR_REMOTE)
    return fail(b, 1, "the second receive ended with " + std::to_string(st) + ", not REMOTE");
  return board_barrier(b, 2, 3) ? 0 : fail(b, 1, "barrier");
}

// A receive that completed in the same progress call that then saw the peer close reports
// done with its data; the close fails the next receive (provider.h, test()).
TEST(CudaIpcFailure, cudamalloc_AReceiveDoneBeforeThePeerClosedStillReportsDone) {
  ZCX_REQUIRE_GPUS(1);
  run_connected_pair([](Board* b, int r, Mesh& m) {
    return r == 0 ? done_sender(b, m) : done_receiver(b, m);
  }, 60000);
}

}  // namespace
}  // namespace zcx::gpu_test
