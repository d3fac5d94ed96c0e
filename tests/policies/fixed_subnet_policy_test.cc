#include "policies/fixed_subnet_policy.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

using testing::FillQueue;
using testing::ThreeSubnetProfile;

constexpr Nanos kNow = Millis(500);
const std::vector<int32_t> kWorkers = {0, 1, 3};

ProfiledPolicyOptions NoOverhead() {
  ProfiledPolicyOptions o;
  o.initial_overhead = 0;
  return o;
}

Decision DecideAt(Policy* p, int queue, double slack_ms) {
  EdfQueue q;
  FillQueue(&q, queue, kNow + Millis(slack_ms));
  return p->Decide(SchedulingContext{q, kNow, absl::MakeConstSpan(kWorkers), 3});
}

TEST(FixedSubnetPolicyTest, BatchesAdaptivelyOnItsSubnet) {
  FixedSubnetPolicy p("fixed-subnet(80)", ThreeSubnetProfile(), 2, NoOverhead());
  Decision d = DecideAt(&p, 20, 12);
  EXPECT_EQ(d.subnet_index, 2);
  EXPECT_EQ(d.batch_size, 4);  // 10 ms
  d = DecideAt(&p, 1, 12);
  EXPECT_EQ(d.batch_size, 1);
  // Its own drop threshold: 80 % at batch 1 = 4 ms, so slack 3 ms is dropped
  // although other subnets could still serve it.
  d = DecideAt(&p, 2, 3);
  EXPECT_EQ(d.drop, 2);
  EXPECT_EQ(d.kind, Decision::Kind::kIdle);
}

// On a GPU the first batch of each shape ran 50-100 ms against a 2 ms
// profile: the start-up drift scaled every tuple past the SLO, every head was
// dropped, nothing completed, and nothing could correct the estimates. After
// telemetry_expiry without a completion they go back to the profile.
TEST(FixedSubnetPolicyTest, ColdBatchesDoNotStopItForGood) {
  FixedSubnetPolicy p("fixed-subnet(80)", ThreeSubnetProfile(), 2, NoOverhead());
  for (int32_t b : {1, 2}) {
    for (int i = 0; i < 4; ++i) p.OnCompletion({0, 2, b, Millis(25 * 4 * b), 0, kNow});
  }
  auto decide = [&](Nanos now) {
    EdfQueue q;
    FillQueue(&q, 3, now + Millis(40));
    return p.Decide(SchedulingContext{q, now, absl::MakeConstSpan(kWorkers), 3});
  };
  Decision stuck = decide(kNow + Millis(500));
  EXPECT_EQ(stuck.kind, Decision::Kind::kIdle);
  EXPECT_EQ(stuck.drop, 3);
  Decision recovered = decide(kNow + Millis(1600));
  ASSERT_EQ(recovered.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(recovered.drop, 0);
  EXPECT_EQ(recovered.subnet_index, 2);
  // The next completions are learned again: one more cold batch now counts.
  for (int i = 0; i < 4; ++i) p.OnCompletion({0, 2, 1, Millis(100), 0, kNow + Millis(1601)});
  for (int i = 0; i < 4; ++i) p.OnCompletion({0, 2, 2, Millis(200), 0, kNow + Millis(1601)});
  EXPECT_EQ(decide(kNow + Millis(1700)).drop, 3);
}

TEST(FixedSubnetPolicyTest, TheLeastAccurateSubnetServesAlone) {
  FixedSubnetPolicy p("infaas", ThreeSubnetProfile(), 0, NoOverhead());
  for (double slack : {1.0, 3.0, 20.0}) {
    Decision d = DecideAt(&p, 20, slack);
    ASSERT_EQ(d.kind, Decision::Kind::kDispatch) << slack;
    EXPECT_EQ(d.subnet_index, 0);
  }
  EXPECT_EQ(DecideAt(&p, 20, 20).batch_size, 8);
  EXPECT_EQ(DecideAt(&p, 20, 1).batch_size, 1);
}

}  // namespace
}  // namespace superserve
