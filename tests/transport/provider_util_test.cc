// The test patterns themselves: the word-at-a-time fill and check must agree with
// pattern_byte at every offset, and a wrong byte must be reported where it is.
#include "transport/provider_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zcx::test {
namespace {

TEST(Pattern, WordsHoldTheSameBytesAsPatternByte) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{4099}}) {
    std::vector<uint8_t> buf(size + 1);
    fill_pattern(buf.data() + 1, size, 5);  // +1: the words are not aligned in memory
    for (size_t i = 0; i < size; ++i)
      ASSERT_EQ(buf[i + 1], pattern_byte(5, size, i)) << "byte " << i << " of " << size;
    EXPECT_EQ(check_pattern(buf.data() + 1, size, 5), "");
  }
}

TEST(Pattern, TheFirstWrongByteIsNamed) {
  const size_t size = 100;
  for (size_t bad : {size_t{0}, size_t{13}, size_t{95}, size_t{99}}) {
    std::vector<uint8_t> buf(size);
    fill_pattern(buf.data(), size, 2);
    buf[bad] ^= 0x10;
    if (bad + 1 < size) buf[size - 1] ^= 0x01;  // a later one must not be named instead
    const std::string got = check_pattern(buf.data(), size, 2);
    EXPECT_EQ(got.rfind("byte " + std::to_string(bad) + " of 100 ", 0), 0u) << got;
  }
  EXPECT_NE(check_pattern(std::vector<uint8_t>(size, 0).data(), size, 3), "");
  std::vector<uint8_t> other(size);
  fill_pattern(other.data(), size, 4);
  EXPECT_NE(check_pattern(other.data(), size, 3), "") << "another rank's bytes passed";
}

}  // namespace
}  // namespace zcx::test
