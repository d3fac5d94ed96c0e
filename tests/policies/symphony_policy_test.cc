// Symphony's deferred batching against schedules computed by hand, on the
// paper's own example (Symphony §3.3: ℓ(b) = b + 5, SLO 12, 3 GPUs).
#include "policies/symphony_policy.h"

#include <vector>

#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

using testing::HandProfile;

ProfiledPolicyOptions NoOverhead() {
  ProfiledPolicyOptions o;
  o.initial_overhead = 0;
  return o;
}

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

// Algorithm 1's arithmetic, exactly: no overhead, no frontrun margin.
SymphonyOptions Deferred() {
  SymphonyOptions o;
  o.base = NoOverhead();
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

TEST(SymphonyPolicyTest, WaitsUntilTheFrontrunMoment) {
  SymphonyPolicy p(LinearProfile(), Deferred());
  // t = 1.5: R1..R3 queued, head deadline 12. B = 3 fits (1.5 + 8 <= 12);
  // frontrun = 12 - ℓ(4) = 3, latest = 12 - ℓ(3) = 4.
  EdfQueue q = PaperQueue(3);
  const std::vector<int32_t> free = {0, 1, 2};
  Decision d = p.Decide({q, Micros(1500), free, 3});
  EXPECT_EQ(d.kind, Decision::Kind::kWakeAt);
  EXPECT_EQ(d.wake_at, Millis(3));
  EXPECT_EQ(d.drop, 0);
  EXPECT_EQ(p.Urgency(q, Micros(1500)), Millis(4));
}

TEST(SymphonyPolicyTest, DispatchesWhenTheNextQueryWouldNoLongerFit) {
  SymphonyPolicy p(LinearProfile(), Deferred());
  // t = 2.25: R4 arrives. frontrun = 12 - ℓ(5) = 2 < now: run R1..R4 now,
  // window closes at latest = 12 - ℓ(4) = 3 (the paper's first batch).
  EdfQueue q = PaperQueue(4);
  const std::vector<int32_t> free = {1, 2, 5};
  Decision d = p.Decide({q, Micros(2250), free, 3});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 4);
  EXPECT_EQ(d.batch_size, 4);
  EXPECT_EQ(d.worker, 1) << "the lowest free id, so that higher ids stay idle";
  EXPECT_EQ(d.earliest, Micros(2250));
  EXPECT_EQ(d.latest, Millis(3));
  EXPECT_EQ(p.Urgency(q, Micros(2250)), Millis(3));
}

TEST(SymphonyPolicyTest, TheBatchIsBoundedByTheHeadsDeadline) {
  SymphonyPolicy p(LinearProfile(), Deferred());
  // 10 queued, 10 ms of slack: the largest b with b + 5 <= 10 is 5, and 6
  // would not fit, so it runs now with 5.
  EdfQueue q;
  testing::FillQueue(&q, 10, Millis(110));
  const std::vector<int32_t> free = {3};
  Decision d = p.Decide({q, Millis(100), free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 5);
  EXPECT_EQ(d.latest, Millis(100)) << "110 - ℓ(5)";
}

TEST(SymphonyPolicyTest, AFullBatchRunsAtOnce) {
  SymphonyPolicy p(LinearProfile(), Deferred());
  EdfQueue q;
  testing::FillQueue(&q, 9, Millis(1000));  // slack far beyond ℓ(8)
  const std::vector<int32_t> free = {0};
  Decision d = p.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 8);
  EXPECT_EQ(d.latest, Millis(1000 - 13));
}

TEST(SymphonyPolicyTest, DropsInfeasibleHeadsBeforePlanning) {
  SymphonyPolicy p(LinearProfile(), Deferred());
  EdfQueue q;
  q.Push({1, 0, 0, Millis(5)});   // 5 ms left < ℓ(1) = 6: infeasible
  q.Push({2, 0, 0, Millis(20)});
  const std::vector<int32_t> free = {0};
  Decision d = p.Decide({q, 0, free, 1});
  EXPECT_EQ(d.kind, Decision::Kind::kIdle);
  EXPECT_EQ(d.drop, 1);
  q.Pop();
  // Now the head (deadline 20, one query): frontrun = 20 - ℓ(2) = 13.
  d = p.Decide({q, 0, free, 1});
  EXPECT_EQ(d.kind, Decision::Kind::kWakeAt);
  EXPECT_EQ(d.wake_at, Millis(13));
}

TEST(SymphonyPolicyTest, DispatchOverheadMovesTheWindowEarlier) {
  SymphonyOptions o;
  o.base.initial_overhead = Millis(1);
  o.frontrun_margin = 0;
  SymphonyPolicy p(LinearProfile(), o);
  EdfQueue q = PaperQueue(3);  // deadline 12; frontrun 12 - 1 - ℓ(4) = 2
  const std::vector<int32_t> free = {0};
  Decision d = p.Decide({q, Micros(1500), free, 1});
  EXPECT_EQ(d.kind, Decision::Kind::kWakeAt);
  EXPECT_EQ(d.wake_at, Millis(2));
}

TEST(SymphonyPolicyTest, TheFrontrunMarginMovesTheDispatchButNotTheWindowsEnd) {
  SymphonyOptions o = Deferred();
  o.frontrun_margin = 0.02;  // the default
  EXPECT_EQ(SymphonyOptions().frontrun_margin, 0.02);
  SymphonyPolicy p(LinearProfile(), o);
  // As WaitsUntilTheFrontrunMoment, 2 % of the 12-ms budget earlier.
  EdfQueue q = PaperQueue(3);
  const std::vector<int32_t> free = {0};
  Decision d = p.Decide({q, Micros(1500), free, 1});
  EXPECT_EQ(d.kind, Decision::Kind::kWakeAt);
  EXPECT_EQ(d.wake_at, Millis(3) - Micros(240));
  EXPECT_EQ(p.Urgency(q, Micros(1500)), Millis(4)) << "latest = 12 - ℓ(3), unchanged";
  d = p.Decide({q, Millis(3) - Micros(240), free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 3);
  EXPECT_EQ(d.latest, Millis(4));
}

TEST(SymphonyPolicyTest, PaddedBatchesWaitUntilTheLatestMoment) {
  // Only powers of two: 5 queries run as a batch of 8, and a 6th costs
  // nothing more, so the frontrun moment is the latest one: d - ℓ(8).
  SymphonyOptions o = Deferred();
  SymphonyPolicy p(HandProfile({1, 2, 4, 8}, {76}, {{6, 7, 9, 13}}), o);
  EdfQueue q;
  testing::FillQueue(&q, 5, Millis(40));
  const std::vector<int32_t> free = {0};
  Decision d = p.Decide({q, Millis(10), free, 1});
  EXPECT_EQ(d.kind, Decision::Kind::kWakeAt);
  EXPECT_EQ(d.wake_at, Millis(27));
  d = p.Decide({q, Millis(27), free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 5);
  EXPECT_EQ(d.batch_size, 8);
}

TEST(SymphonyPolicyTest, SlidingWindowDropsAHeadThatWouldShrinkTheBatchUnderLoad) {
  // ℓ(b) = b + 5 ms, SLO 24 ms. At 4,000 q/s the rate needs n = 4000 · ℓ(8)
  // / 8 = 6.5 workers at batch 8, and ℓ(8) · (1 + 1/6.5) = 15 ms <= 24: the
  // target is the largest batch, 8. Ten queued, the head has 9 ms of slack:
  // below 0.9 · ℓ(8) = 11.7 ms, so it is dropped rather than run as a batch
  // of 4; the next head (12 ms) is kept.
  auto run = [](bool window, double rate_qps) {
    SymphonyOptions o = Deferred();
    o.window_drop = window;
    SymphonyPolicy p(LinearProfile(), o);
    const Nanos now = Seconds(1);
    for (int i = 0; i < static_cast<int>(rate_qps / 4); ++i) {  // 250 ms window
      p.OnArrival({}, now - Millis(250) + static_cast<Nanos>(i * 1e9 / rate_qps));
    }
    EdfQueue q;
    q.Push({1, 0, now - Millis(15), now + Millis(9)});
    for (int i = 2; i <= 10; ++i) q.Push({static_cast<QueryId>(i), 0, now - Millis(12), now + Millis(12)});
    const std::vector<int32_t> free = {0};
    return p.Decide({q, now, free, 8});
  };
  Decision loaded = run(true, 4000);
  EXPECT_EQ(loaded.kind, Decision::Kind::kIdle);
  EXPECT_EQ(loaded.drop, 1);
  // Without the window: the head's 9 ms fit a batch of 4, run now.
  Decision plain = run(false, 4000);
  ASSERT_EQ(plain.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(plain.take, 4);
  // At 10 q/s the target is 1 (n = 0.015 workers): nothing is dropped.
  Decision light = run(true, 10);
  ASSERT_EQ(light.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(light.drop, 0);
  EXPECT_EQ(light.take, 4);
  SymphonyPolicy p(LinearProfile(), Deferred());
  EXPECT_EQ(p.TargetBatch(Millis(24), 4000), 8);
  EXPECT_EQ(p.TargetBatch(Millis(24), 10), 1);
}

TEST(SymphonyPolicyTest, ServesTheMostAccurateSubnetAndIsInTheFactory) {
  ModelProfile two = HandProfile({1, 2}, {70, 80}, {{1, 2}, {3, 4}});
  auto made = MakePolicy("symphony", two, PolicyConfig());
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ((*made)->name(), "symphony");
  EdfQueue q;
  testing::FillQueue(&q, 2, Millis(100));
  const std::vector<int32_t> free = {0};
  Decision d = (*made)->Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.subnet_index, 1);
  EXPECT_EQ(d.take, 2);
}

}  // namespace
}  // namespace superserve
