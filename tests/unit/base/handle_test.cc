#include "base/handle.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace zcx {
namespace {

TEST(Handle, RoundTrip) {
  uint8_t h[ZCX_HANDLE_BYTES];
  const char payload[] = "address and secret";
  ASSERT_EQ(handle_encode(ZCX_PROVIDER_ID_TCP, payload, sizeof payload, h), Status::kSuccess);
  char out[kHandlePayloadMax];
  size_t len = 0;
  ASSERT_EQ(handle_decode(h, ZCX_PROVIDER_ID_TCP, out, sizeof out, &len), Status::kSuccess);
  EXPECT_EQ(len, sizeof payload);
  EXPECT_EQ(memcmp(out, payload, len), 0);
}

TEST(Handle, RejectsOversizedPayloadAndNulls) {
  uint8_t h[ZCX_HANDLE_BYTES];
  uint8_t big[kHandlePayloadMax + 1] = {};
  EXPECT_EQ(handle_encode(1, big, sizeof big, h), Status::kInvalidArg);
  EXPECT_EQ(handle_encode(1, nullptr, 4, h), Status::kInvalidArg);
  size_t len;
  char out[8];
  EXPECT_EQ(handle_decode(nullptr, 1, out, sizeof out, &len), Status::kInvalidArg);
}

TEST(Handle, RejectsWrongMagicVersionProviderAndLength) {
  uint8_t good[ZCX_HANDLE_BYTES];
  ASSERT_EQ(handle_encode(ZCX_PROVIDER_ID_SHM, "x", 1, good), Status::kSuccess);
  char out[kHandlePayloadMax];
  size_t len;
  uint8_t h[ZCX_HANDLE_BYTES];

  memcpy(h, good, sizeof h);
  h[0] ^= 0xff;  // magic
  EXPECT_EQ(handle_decode(h, ZCX_PROVIDER_ID_SHM, out, sizeof out, &len), Status::kInvalidArg);
  memcpy(h, good, sizeof h);
  h[4] = 9;  // version
  EXPECT_EQ(handle_decode(h, ZCX_PROVIDER_ID_SHM, out, sizeof out, &len), Status::kInvalidArg);
  EXPECT_EQ(handle_decode(good, ZCX_PROVIDER_ID_TCP, out, sizeof out, &len),
            Status::kInvalidArg);
  memcpy(h, good, sizeof h);
  h[6] = 0xff;  // length 0xff.. > payload max
  h[7] = 0xff;
  EXPECT_EQ(handle_decode(h, ZCX_PROVIDER_ID_SHM, out, sizeof out, &len), Status::kInvalidArg);
  memcpy(h, good, sizeof h);
  h[6] = 100;  // within max but above the caller's capacity
  EXPECT_EQ(handle_decode(h, ZCX_PROVIDER_ID_SHM, out, 16, &len), Status::kInvalidArg);
}

TEST(Handle, RandomBytesNeverCrash) {
  std::mt19937 rng(1234);
  char out[kHandlePayloadMax];
  size_t len;
  for (int i = 0; i < 10000; ++i) {
    uint8_t h[ZCX_HANDLE_BYTES];
    for (uint8_t& b : h) b = static_cast<uint8_t>(rng());
    if (i % 2) memcpy(h, "ZCXH\x01\x01", 6);  // valid prefix, garbage length/payload
    Status s = handle_decode(h, 1, out, sizeof out, &len);
    if (s == Status::kSuccess) {
      EXPECT_LE(len, kHandlePayloadMax);
    }
  }
}

}  // namespace
}  // namespace zcx
