// The reproduction's timeout-based and eager batching (Symphony §3.4) on the
// paper's example profile (ℓ(b) = b + 5 ms).
#include "bench/baselines/timeout_batching_policy.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

using testing::HandProfile;

// ℓ(b) = b + 5 ms for every batch size 1..8 (one subnet).
ModelProfile LinearProfile() {
  std::vector<int32_t> batches;
  std::vector<double> ms;
  for (int b = 1; b <= 8; ++b) {
    batches.push_back(b);
    ms.push_back(b + 5.0);
  }
  return HandProfile(batches, {76}, {ms});
}

SymphonyOptions NoOverheadNoMargin() {
  SymphonyOptions o;
  o.base.initial_overhead = 0;
  o.frontrun_margin = 0;
  return o;
}

// Queries i = 1..n arriving at 0.75 (i - 1) ms with SLO 12 ms.
EdfQueue PaperQueue(int n) {
  EdfQueue q;
  for (int i = 1; i <= n; ++i) {
    const Nanos arrival = Micros(750) * (i - 1);
    q.Push({static_cast<QueryId>(i), 0, arrival, arrival + Millis(12)});
  }
  return q;
}

TEST(TimeoutBatchingPolicyTest, DispatchesTheTimeoutAfterTheHeadArrived) {
  TimeoutBatchingPolicy timeout(LinearProfile(), Millis(2), NoOverheadNoMargin());
  EXPECT_EQ(timeout.name(), "timeout(2000us)");
  EdfQueue q = PaperQueue(2);  // head arrived at 0
  const std::vector<int32_t> free = {4, 6};
  Decision d = timeout.Decide({q, Millis(1), free, 2});
  EXPECT_EQ(d.kind, Decision::Kind::kWakeAt);
  EXPECT_EQ(d.wake_at, Millis(2));
  d = timeout.Decide({q, Millis(2), free, 2});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 2);
  EXPECT_EQ(d.worker, 4);
}

TEST(TimeoutBatchingPolicyTest, EagerDispatchesAtOnce) {
  TimeoutBatchingPolicy eager(LinearProfile(), 0, NoOverheadNoMargin());
  EXPECT_EQ(eager.name(), "eager");
  EdfQueue q = PaperQueue(2);
  const std::vector<int32_t> free = {4, 6};
  Decision d = eager.Decide({q, Micros(800), free, 2});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 2);
}

}  // namespace
}  // namespace superserve
