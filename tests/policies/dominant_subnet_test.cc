#include "policies/dominant_subnet.h"

#include "gtest/gtest.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

using testing::HandProfile;

TEST(DominantSubnetTest, OneSubnetIsDominant) {
  EXPECT_EQ(DominantSubnet(HandProfile({1, 2}, {76}, {{1, 2}})), 0);
}

TEST(DominantSubnetTest, ATradeOffHasNone) {
  EXPECT_EQ(DominantSubnet(testing::ThreeSubnetProfile()), -1);
  EXPECT_EQ(DominantSubnet(ModelProfile()), -1);
}

TEST(DominantSubnetTest, TheMostAccurateWinsIfNoSlowerAtEveryBatch) {
  // Subnet 1 is the most accurate and as fast or faster at both batches.
  EXPECT_EQ(DominantSubnet(HandProfile({1, 2}, {70, 80}, {{2, 3}, {2, 2.5}})), 1);
  // ... but slower at batch 2 than the less accurate one: a trade.
  EXPECT_EQ(DominantSubnet(HandProfile({1, 2}, {70, 80}, {{2, 2}, {1, 2.5}})), -1);
}

TEST(DominantSubnetTest, EqualAccuracyPicksTheFasterOrTheFirstOfEqualRows) {
  EXPECT_EQ(DominantSubnet(HandProfile({1, 2}, {80, 80}, {{2, 3}, {1, 2}})), 1);
  EXPECT_EQ(DominantSubnet(HandProfile({1, 2}, {80, 80}, {{1, 2}, {1, 2}})), 0);
  // Faster at batch 1, slower at batch 2: which is better depends on the
  // batch, so ratefit chooses.
  EXPECT_EQ(DominantSubnet(HandProfile({1, 2}, {80, 80}, {{2, 2}, {1, 3}})), -1);
}

}  // namespace
}  // namespace superserve
