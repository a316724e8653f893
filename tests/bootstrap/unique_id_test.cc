#include "common/bootstrap/bootstrap.h"
#include "common/bootstrap/bootstrap_internal.h"
#include "common/random.h"
#include "bootstrap/test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace zcx {
namespace {

TEST(UniqueId, CreateEncodeDecodeRoundTrip) {
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess) << last_error();
  EXPECT_NE(id.secret, 0u);
  EXPECT_NE(id.root.port(), 0);
  zcx_unique_id_t raw;
  ASSERT_EQ(unique_id_encode(id, &raw), Status::kSuccess);
  UniqueId back;
  ASSERT_EQ(unique_id_decode(raw, &back), Status::kSuccess) << last_error();
  EXPECT_EQ(back.secret, id.secret);
  EXPECT_EQ(back.root.to_string(), id.root.to_string());
  // The listener it reserved is handed over once.
  EXPECT_TRUE(take_reserved_listener(id).valid());
  EXPECT_FALSE(take_reserved_listener(id).valid());
}

TEST(UniqueId, SecretsDiffer) {
  uint64_t a = 0, b = 0;
  ASSERT_EQ(random_secret(&a), Status::kSuccess);
  ASSERT_EQ(random_secret(&b), Status::kSuccess);
  EXPECT_NE(a, b);
}

TEST(UniqueId, RejectsMalformed) {
  UniqueId id;
  ASSERT_EQ(sockaddr_parse("127.0.0.1:4000", &id.root), Status::kSuccess);
  id.secret = 0x1234;
  zcx_unique_id_t good;
  ASSERT_EQ(unique_id_encode(id, &good), Status::kSuccess);
  UniqueId out;
  zcx_unique_id_t bad = good;
  bad.internal[0] ^= 1;  // magic
  EXPECT_EQ(unique_id_decode(bad, &out), Status::kInvalidArg);
  bad = good;
  bad.internal[4] = 9;  // version
  EXPECT_EQ(unique_id_decode(bad, &out), Status::kInvalidArg);
  bad = good;
  bad.internal[8] = 7;  // address family
  EXPECT_EQ(unique_id_decode(bad, &out), Status::kInvalidArg);
  bad = good;
  memset(bad.internal + 28, 0, 8);  // zero secret
  EXPECT_EQ(unique_id_decode(bad, &out), Status::kInvalidArg);
  bad = good;
  bad.internal[100] = 1;  // padding
  EXPECT_EQ(unique_id_decode(bad, &out), Status::kInvalidArg);
  zcx_unique_id_t zero{};
  EXPECT_EQ(unique_id_decode(zero, &out), Status::kInvalidArg);
  EXPECT_EQ(unique_id_decode(good, nullptr), Status::kInvalidArg);
  EXPECT_EQ(unique_id_encode(id, nullptr), Status::kInvalidArg);
  UniqueId no_secret = id;
  no_secret.secret = 0;
  EXPECT_EQ(unique_id_encode(no_secret, &bad), Status::kInvalidArg);
}

TEST(UniqueId, RandomBytesNeverDecode) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    zcx_unique_id_t raw;
    for (auto& c : raw.internal) c = static_cast<char>(rng());
    UniqueId out;
    EXPECT_EQ(unique_id_decode(raw, &out), Status::kInvalidArg);
  }
}

TEST(Secret, ParseAndDerive) {
  uint64_t v = 0;
  EXPECT_EQ(parse_secret("00000000000000ff", &v), Status::kSuccess);
  EXPECT_EQ(v, 0xffu);
  EXPECT_EQ(parse_secret("DEADbeef", &v), Status::kSuccess);
  EXPECT_EQ(v, 0xdeadbeefu);
  EXPECT_EQ(parse_secret("", &v), Status::kInvalidArg);
  EXPECT_EQ(parse_secret("0", &v), Status::kInvalidArg);
  EXPECT_EQ(parse_secret("12345678901234567", &v), Status::kInvalidArg);
  EXPECT_EQ(parse_secret("xyz", &v), Status::kInvalidArg);
  EXPECT_EQ(derive_secret("job1"), derive_secret("job1"));
  EXPECT_NE(derive_secret("job1"), derive_secret("job2"));
}

}  // namespace
}  // namespace zcx
