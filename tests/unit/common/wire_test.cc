#include "common/wire.h"

#include <gtest/gtest.h>

namespace zcx::wire {
namespace {

TEST(Wire, RoundTripLittleEndian) {
  uint8_t buf[64];
  Writer w(buf, sizeof buf);
  w.u8(0xab);
  w.u16(0x1234);
  w.u32(0xdeadbeef);
  w.u64(0x0102030405060708ull);
  w.str("host");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(buf[1], 0x34);  // little-endian on the wire whatever the host
  Reader r(buf, w.size());
  EXPECT_EQ(r.u8(), 0xab);
  EXPECT_EQ(r.u16(), 0x1234);
  EXPECT_EQ(r.u32(), 0xdeadbeefu);
  EXPECT_EQ(r.u64(), 0x0102030405060708ull);
  EXPECT_EQ(r.str(64), "host");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(Wire, WriterOverflowFailsWithoutWritingPastEnd) {
  uint8_t buf[8] = {};
  uint8_t guard = 0x5a;
  Writer w(buf, 6);
  w.u32(1);
  w.u32(2);  // does not fit
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(buf[6], 0);
  EXPECT_EQ(guard, 0x5a);
}

TEST(Wire, ReaderTruncationIsSticky) {
  uint8_t buf[3] = {1, 2, 3};
  Reader r(buf, sizeof buf);
  EXPECT_EQ(r.u16(), 0x0201);
  EXPECT_EQ(r.u32(), 0u);  // only one byte left
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.u8(), 0u);  // stays failed
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(Wire, StringLengthBeyondBufferOrLimitFails) {
  uint8_t buf[8];
  Writer w(buf, sizeof buf);
  w.u16(500);  // claims 500 bytes
  w.u8('x');
  Reader r(buf, w.size());
  EXPECT_EQ(r.str(1000), "");
  EXPECT_FALSE(r.ok());
  Writer w2(buf, sizeof buf);
  w2.str("abcdef");
  Reader r2(buf, w2.size());
  EXPECT_EQ(r2.str(3), "");  // over the caller's limit
  EXPECT_FALSE(r2.ok());
}

}  // namespace
}  // namespace zcx::wire
