#include "bench/baselines/greedy_policies.h"

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

TEST(MaxBatchPolicyTest, MaximisesBatchThenAccuracy) {
  MaxBatchPolicy p(ThreeSubnetProfile(), NoOverhead());
  Decision d = DecideAt(&p, 20, 12);  // 70 % fits batch 8; at 8, 75 % (9 ms) fits
  EXPECT_EQ(d.batch_size, 8);
  EXPECT_EQ(d.subnet_index, 1);
  d = DecideAt(&p, 20, 7);
  EXPECT_EQ(d.batch_size, 8);
  EXPECT_EQ(d.subnet_index, 0);
  d = DecideAt(&p, 20, 3);  // 70 % at 4 = 2.5 ms
  EXPECT_EQ(d.batch_size, 4);
  EXPECT_EQ(d.subnet_index, 0);
  d = DecideAt(&p, 2, 12);  // partial: batch 2, most accurate fitting = 80 % (6 ms)
  EXPECT_EQ(d.batch_size, 2);
  EXPECT_EQ(d.take, 2);
  EXPECT_EQ(d.subnet_index, 2);
  EXPECT_EQ(d.worker, 0);
}

TEST(MaxAccPolicyTest, MaximisesAccuracyThenBatch) {
  MaxAccPolicy p(ThreeSubnetProfile(), NoOverhead());
  Decision d = DecideAt(&p, 20, 7);  // 80 % fits at 1 (4 ms); largest batch 2 (6 ms)
  EXPECT_EQ(d.subnet_index, 2);
  EXPECT_EQ(d.batch_size, 2);
  d = DecideAt(&p, 20, 3);  // only 75 % (2 ms) or 70 %: 75 %, batch 2 (3 ms)
  EXPECT_EQ(d.subnet_index, 1);
  EXPECT_EQ(d.batch_size, 2);
  d = DecideAt(&p, 3, 20);  // partial: 80 %, batch 4 for 3 queries
  EXPECT_EQ(d.subnet_index, 2);
  EXPECT_EQ(d.batch_size, 4);
  EXPECT_EQ(d.take, 3);
}

}  // namespace
}  // namespace superserve
