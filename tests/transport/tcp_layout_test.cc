// The tcp striping layout: every byte of a message belongs to exactly one socket, in chunk
// order, for every (size, inline, chunk, nsocks) -- sender and receiver rely on it.
#include "tcp/tcp.h"

#include <gtest/gtest.h>

#include <vector>

namespace zcx::tcp {
namespace {

void check_layout(const Layout& l, size_t size) {
  std::vector<uint8_t> owner(size, 0xff);
  size_t total = 0;
  for (int s = 0; s < l.nsocks; ++s) {
    size_t part = stripe_bytes(l, size, s);
    total += part;
    size_t off = 0;
    while (off < part) {  // walk the part in odd steps, as partial sends would
      iovec iov[4];
      int n = stripe_iov(l, nullptr, size, s, off, iov, 4);
      ASSERT_GT(n, 0) << "no iovec at offset " << off << " of part " << part;
      size_t step = 0;
      for (int i = 0; i < n; ++i) {
        size_t at = reinterpret_cast<size_t>(iov[i].iov_base);
        ASSERT_LE(at + iov[i].iov_len, size);
        for (size_t b = at; b < at + iov[i].iov_len; ++b) {
          ASSERT_EQ(owner[b], 0xff) << "byte " << b << " on two sockets";
          owner[b] = static_cast<uint8_t>(s);
        }
        step += iov[i].iov_len;
      }
      off += step;
    }
    ASSERT_EQ(off, part);
    iovec after[1];
    EXPECT_EQ(stripe_iov(l, nullptr, size, s, part, after, 1), 0) << "bytes beyond the part";
  }
  EXPECT_EQ(total, size);
  for (size_t b = 0; b < size; ++b) {
    ASSERT_NE(owner[b], 0xff) << "byte " << b << " on no socket";
    if (size > l.inline_max)
      ASSERT_EQ(owner[b], (b / l.chunk) % static_cast<size_t>(l.nsocks)) << "byte " << b;
    else
      ASSERT_EQ(owner[b], 0);
  }
}

TEST(TcpLayout, EveryByteOnExactlyOneSocketInChunkOrder) {
  for (int nsocks : {1, 2, 3, 4, 8})
    for (size_t chunk : {size_t{4096}, size_t{5000}, size_t{65536}})
      for (size_t inl : {size_t{0}, size_t{100}, size_t{4096}})
        for (size_t size : {size_t{0}, size_t{1}, size_t{99}, size_t{100}, size_t{101},
                            size_t{4095}, size_t{4096}, size_t{4097}, size_t{12288},
                            size_t{12289}, size_t{65536 * 3 + 7}, size_t{1} << 20}) {
          SCOPED_TRACE(testing::Message() << "nsocks " << nsocks << " chunk " << chunk
                                          << " inline " << inl << " size " << size);
          check_layout(Layout{nsocks, inl, chunk}, size);
        }
}

TEST(TcpLayout, LargestMessageDoesNotOverflow) {
  Layout l{8, 65536, 4096};
  size_t total = 0;
  for (int s = 0; s < 8; ++s) total += stripe_bytes(l, kMaxMessage, s);
  EXPECT_EQ(total, kMaxMessage);
  EXPECT_EQ(stripe_bytes(l, kMaxMessage - 1, 7) + 1, stripe_bytes(l, kMaxMessage, 7));
}

}  // namespace
}  // namespace zcx::tcp
