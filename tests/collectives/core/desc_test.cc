// How an operation is named in errors: the reduction op only where one applies, the root
// only where there is one; and what differs between two ranks' descriptors.
#include "core/desc.h"

#include "select/select.h"

#include <zcx/coll.h>

#include <gtest/gtest.h>

namespace zcx::coll {
namespace {

OpDesc desc(CollKind kind, zcx_dtype_t dtype, zcx_redop_t op, int root, uint64_t count,
            Algo algo) {
  OpDesc d;
  d.kind = static_cast<uint8_t>(kind);
  d.dtype = static_cast<uint8_t>(dtype);
  d.redop = static_cast<uint8_t>(op);
  d.root = root;
  d.count = count;
  d.algo = static_cast<uint8_t>(algo);
  d.seq = 7;
  return d;
}

TEST(DescDescribe, NamesTheOpAndRootOnlyWhereTheyApply) {
  EXPECT_EQ(desc_describe(desc(CollKind::kAllreduce, ZCX_FLOAT32, ZCX_SUM, -1, 100, Algo::kRing)),
            "allreduce #7 float32 sum count 100 algo ring");
  EXPECT_EQ(desc_describe(desc(CollKind::kReduce, ZCX_INT32, ZCX_MAX, 2, 5, Algo::kChain)),
            "reduce #7 int32 max count 5 root 2 algo chain");
  EXPECT_EQ(desc_describe(desc(CollKind::kBroadcast, ZCX_INT8, ZCX_SUM, 1, 4, Algo::kTree)),
            "broadcast #7 int8 count 4 root 1 algo tree");
  EXPECT_EQ(desc_describe(desc(CollKind::kAllgather, ZCX_FLOAT32, ZCX_SUM, -1, 319, Algo::kRing)),
            "allgather #7 float32 count 319 algo ring");
  EXPECT_EQ(desc_describe(desc(CollKind::kAlltoall, ZCX_FLOAT32, ZCX_SUM, -1, 8, Algo::kPairwise)),
            "alltoall #7 float32 count 8 algo pairwise");
  EXPECT_EQ(desc_describe(desc(CollKind::kSendRecv, ZCX_UINT8, ZCX_SUM, -1, 8, Algo::kDirect)),
            "point-to-point send/recv");
}

TEST(DescDiff, SaysWhatDiffers) {
  const OpDesc mine = desc(CollKind::kBroadcast, ZCX_INT32, ZCX_SUM, 0, 10, Algo::kTree);
  OpDesc theirs = mine;
  EXPECT_EQ(desc_diff(mine, theirs), "");
  theirs.root = 1;
  theirs.count = 11;
  const std::string diff = desc_diff(mine, theirs);
  EXPECT_NE(diff.find("root 0 here vs 1 there"), std::string::npos) << diff;
  EXPECT_NE(diff.find("10 here vs 11 there"), std::string::npos) << diff;
  theirs.magic = 0;
  EXPECT_NE(desc_diff(mine, theirs).find("not a zcx collective descriptor"), std::string::npos);
}

}  // namespace
}  // namespace zcx::coll
