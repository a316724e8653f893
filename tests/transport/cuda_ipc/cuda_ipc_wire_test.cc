// The cuda_ipc POST, written and read without a GPU: every kind round-trips, a buffer over
// several cuMem allocations lists them (one descriptor each), and a POST whose fields do not
// hold together is refused, whatever the peer sends (pieces without descriptors, a count out
// of range, pieces that do not hold the capacity, a truncated or unknown one).
#include "cuda_ipc/cuda_ipc.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>

namespace zcx::cuda_ipc {
namespace {

constexpr uint64_t kSeg = uint64_t{2} << 20;

Export vmm(uint64_t base, uint64_t offset) {
  Export e;
  e.kind = ExportKind::kVmm;
  e.base = base;
  e.size = kSeg;
  e.offset = offset;
  e.buffer_id = base / kSeg;
  return e;
}

// A buffer over `n` segments from 100 bytes into the first, with a descriptor per piece.
PostedBuffer pieces(size_t n, uint64_t cap) {
  PostedBuffer p;
  p.cap = cap;
  for (size_t i = 0; i < n; ++i) {
    p.pieces.push_back(vmm(0x7f0000000000 + i * kSeg, i == 0 ? 100 : 0));
    p.fds.emplace_back(memfd_create("zcx-test", MFD_CLOEXEC));
  }
  return p;
}

// Writes p, then reads it back with `fds` descriptors attached.
bool round_trip(const PostedBuffer& p, size_t fds, PostedBuffer* out, size_t cut = 0) {
  uint8_t buf[kMaxPacket];
  size_t len = post_write(7, p, buf);
  wire::Reader r(buf, len - cut);
  EXPECT_EQ(r.u32(), kPostMagic);
  for (size_t i = 0; i < fds; ++i) out->fds.emplace_back(memfd_create("zcx-test", MFD_CLOEXEC));
  uint64_t seq = 0;
  const bool read = post_read(r, &seq, out);
  EXPECT_TRUE(!read || seq == 7);
  return read;
}

TEST(CudaIpcPost, EveryKindRoundTrips) {
  PostedBuffer legacy;
  legacy.cap = 4096;
  legacy.pieces.push_back(vmm(0x7f0000000000, 64));
  legacy.pieces[0].kind = ExportKind::kLegacy;
  std::memset(legacy.pieces[0].legacy, 0xab, sizeof legacy.pieces[0].legacy);
  PostedBuffer got;
  ASSERT_TRUE(round_trip(legacy, 0, &got));
  ASSERT_EQ(got.pieces.size(), 1u);
  EXPECT_EQ(got.pieces[0].kind, ExportKind::kLegacy);
  EXPECT_EQ(got.pieces[0].offset, 64u);
  EXPECT_EQ(got.pieces[0].legacy[63], 0xab);

  const PostedBuffer many = pieces(kMaxPieces, kMaxPieces * kSeg - 100);
  PostedBuffer back;
  ASSERT_TRUE(round_trip(many, kMaxPieces, &back));
  ASSERT_EQ(back.pieces.size(), kMaxPieces);
  for (size_t i = 0; i < kMaxPieces; ++i) {
    EXPECT_EQ(back.pieces[i].kind, ExportKind::kVmm);
    EXPECT_EQ(back.pieces[i].base, many.pieces[i].base);
    EXPECT_EQ(back.pieces[i].offset, many.pieces[i].offset);
    EXPECT_EQ(back.pieces[i].buffer_id, many.pieces[i].buffer_id);
  }
  PostedBuffer none, none_back;
  none.pieces.push_back(Export{ExportKind::kNone});
  ASSERT_TRUE(round_trip(none, 0, &none_back));
  EXPECT_EQ(none_back.pieces[0].size, 0u);
}

TEST(CudaIpcPost, PiecesThatDoNotHoldTogetherAreRefused) {
  PostedBuffer out;
  EXPECT_FALSE(round_trip(pieces(3, 3 * kSeg - 100), 2, &out)) << "a descriptor short";
  out = {};
  EXPECT_FALSE(round_trip(pieces(3, 3 * kSeg - 100), 4, &out)) << "a descriptor too many";
  out = {};
  EXPECT_FALSE(round_trip(pieces(3, 3 * kSeg - 99), 3, &out)) << "one byte over the pieces";
  PostedBuffer gap = pieces(3, 2 * kSeg);
  gap.pieces[1].offset = 8;  // only the first piece starts inside its allocation
  out = {};
  EXPECT_FALSE(round_trip(gap, 3, &out));
  PostedBuffer huge = pieces(2, 100);
  huge.pieces[1].size = kMaxMessage + 1;
  out = {};
  EXPECT_FALSE(round_trip(huge, 2, &out));
  out = {};
  EXPECT_FALSE(round_trip(pieces(3, 3 * kSeg - 100), 3, &out, 1)) << "truncated";
  PostedBuffer vmm_alone = pieces(1, 100);
  out = {};
  EXPECT_FALSE(round_trip(vmm_alone, 0, &out)) << "a VMM export without its descriptor";
}

// The count of further pieces as a peer could write it: 0, kMaxPieces and more are refused.
TEST(CudaIpcPost, PieceCountsOutOfRangeAreRefused) {
  for (uint32_t more : {0u, static_cast<uint32_t>(kMaxPieces), 0xffffffffu}) {
    uint8_t buf[kMaxPacket];
    wire::Writer w(buf, sizeof buf);
    w.u64(0);
    w.u64(100);
    w.u32(static_cast<uint32_t>(ExportKind::kPieces));
    for (int i = 0; i < 4 + 8; ++i) w.u64(0);  // first piece and the legacy handle
    w.u32(more);
    PostedBuffer out;
    wire::Reader r(buf, w.size());
    uint64_t seq = 0;
    EXPECT_FALSE(post_read(r, &seq, &out)) << more;
  }
}

// Random bytes never crash the reader nor read past the packet.
TEST(CudaIpcPost, RandomBytesNeverCrash) {
  std::mt19937_64 rng(12345);
  for (int k = 0; k < 20000; ++k) {
    uint8_t buf[kMaxPacket];
    const size_t len = rng() % sizeof buf;
    for (size_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(rng());
    if (len >= 24) buf[20] = static_cast<uint8_t>(rng() % 6);  // kind: mostly valid
    wire::Reader r(buf, len);
    PostedBuffer out;
    uint64_t seq = 0;
    (void)post_read(r, &seq, &out);
  }
}

}  // namespace
}  // namespace zcx::cuda_ipc
