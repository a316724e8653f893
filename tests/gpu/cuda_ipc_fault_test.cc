// The cuda_ipc provider against a peer that breaks its protocol, and a peer that closes:
// forged DATA packets (no memfd, one shorter than its size, one that could still shrink, one
// larger than the receive) and a forged VMM POST whose fd is no CUDA allocation each fail the
// transfer naming the peer; a receive completed just before the peer closed still reports
// done. 2 forked ranks on GPU 0; skips, with the reason, where there is no GPU.
#include "common/wire.h"
#include "cuda_ipc/cuda_ipc.h"
#include "cuda_ipc_pair.h"
#include "gpu_test_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

namespace zcx::gpu_test {
namespace {

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

const char* bad_data_label(BadData kind) {
  static const char* const kNames[] = {"NoFd", "ShortMemfd", "Unsealed", "OverCapacity"};
  return kNames[static_cast<int>(kind)];
}

// What gtest prints for a forgery (and ctest's test names carry), rather than its bytes.
void PrintTo(BadData kind, std::ostream* os) { *os << bad_data_label(kind); }

std::string bad_data_name(const ::testing::TestParamInfo<BadData>& info) {
  return bad_data_label(info.param);
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
