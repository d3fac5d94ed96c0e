// The Clockwork-like and Nexus-like baselines for dynamic models (Orloj's
// comparisons), on hand-built cases, and their registration by name.
#include "bench/baselines/dynamic_baselines.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/baselines/baselines.h"
#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

using testing::App;
using testing::DynamicProfile;

Query Q(QueryId id, int32_t app, Nanos arrival, Nanos deadline) {
  return Query{id, app, arrival, deadline};
}

TEST(DynamicPolicyTest, TelemetryMovesThePolicysEstimates) {
  // Nexus plans from the mix's mean: two applications, 1 ms and 9 ms.
  ModelProfile p = DynamicProfile(0, 1, {1, 2, 4}, {{"short", 1000, 1001}, {"long", 9000, 9001}});
  NexusLikeOptions o;
  o.base.estimator.min_samples = 10;
  o.base.estimator.share_window = 50;
  o.base.refresh_interval = Millis(1);
  NexusLikePolicy nexus(p, o);
  nexus.OnApplicationNamed(0, "long");
  nexus.OnApplicationNamed(1, "short");
  EXPECT_NEAR(ToMicros(nexus.MeanLatency(0)), 5000.5, 1);
  // Only "long" arrives, and it now runs 20 ms.
  CompletionTelemetry t;
  t.batch_size = 1;
  for (int i = 0; i < 60; ++i) {
    nexus.OnArrival(Q(i + 1, /*long*/ 0, 0, Seconds(1)), 0);
    t.queries.push_back({static_cast<QueryId>(i + 1), 0, Millis(20), -1});
  }
  nexus.OnCompletion(t);
  EdfQueue q;
  nexus.Decide({q, Millis(5), {}, 1});  // refreshes
  EXPECT_NEAR(ToMicros(nexus.MeanLatency(0)), 20000, 100);
  EXPECT_NEAR(ToMicros(nexus.MeanLatency(1)), 40000, 200);
}

// --- product CDF, expected max, score

TEST(ClockworkLikePolicyTest, LargestBatchWhoseHighPercentileFitsTheHead) {
  ModelProfile p = DynamicProfile(0, 1, {1, 2, 4, 8}, {{"a", 1000, 2000}});
  ClockworkLikeOptions o;
  o.base.initial_overhead = 0;
  o.min_samples = 4;
  ClockworkLikePolicy cw(p, o);
  EXPECT_NEAR(ToMicros(cw.Estimate(2)), 4 * 1990, 1);  // k * p99
  EdfQueue q;
  for (QueryId id = 1; id <= 8; ++id) q.Push(Q(id, 0, 0, Millis(9)));
  const int32_t free[] = {2};
  Decision d = cw.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.batch_size, 4);  // 7.96 ms fits 9 ms, 8 * 1.99 does not
  EXPECT_EQ(d.take, 4);
  EXPECT_TRUE(d.take_ids.empty()) << "EDF order";
  // A head that not even a batch of one (p99 1.99 ms) can save is dropped.
  EdfQueue late;
  late.Push(Q(1, 0, 0, Micros(1500)));
  late.Push(Q(2, 0, 0, Millis(50)));
  d = cw.Decide({late, 0, free, 1});
  EXPECT_EQ(d.drop, 1);
  EXPECT_EQ(d.take, 1);
  // Measured batches replace the profile's estimate (Clockwork's online
  // profile).
  CompletionTelemetry t;
  t.batch_size = 4;
  t.exec = Millis(3);
  for (int i = 0; i < 4; ++i) cw.OnCompletion(t);
  EXPECT_EQ(cw.Estimate(2), Millis(3));
}

TEST(ClockworkWindowsPolicyTest, MedianEstimateAndActionWindows) {
  // ~1.5 ms per query on average: the profile's point estimate of a batch of
  // k is k * 1.5 ms (the mean, not the max of k).
  ModelProfile p = DynamicProfile(0, 1, {1, 2, 4, 8}, {{"a", 1000, 2000}});
  ClockworkWindowsOptions o;
  o.base.initial_overhead = 0;
  ClockworkWindowsPolicy cw(p, o);
  EXPECT_NEAR(ToMicros(cw.Estimate(2)), 4 * 1500, 1);
  EdfQueue q;
  for (QueryId id = 1; id <= 4; ++id) q.Push(Q(id, 0, 0, Millis(7)));
  for (QueryId id = 5; id <= 8; ++id) q.Push(Q(id, 0, 0, Millis(12)));
  const int32_t free[] = {0};
  Decision d = cw.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.batch_size, 4);  // 6 ms fits the head's 7 ms, 12 ms does not
  EXPECT_EQ(d.latest, Millis(1)) << "the last start that meets 7 ms with the estimate";
  EXPECT_EQ(d.earliest, 0);
  for (int i = 0; i < 4; ++i) q.Pop();
  // The batch ran long (10 ms against 6): the next batch, committed to start
  // at 6 ms (its head had arrived by 6 - 5 ms), had to start by 12 - 6 =
  // 6 ms. Its window closed: cancelled, its four queries fail.
  ClockworkWindowsPolicy late = cw;
  d = late.Decide({q, Millis(10), free, 1});
  EXPECT_EQ(d.kind, Decision::Kind::kIdle);
  EXPECT_EQ(d.drop, 4);
  EXPECT_EQ(late.cancelled(), 1);
  // On time (free at 6 ms) the same batch runs.
  ClockworkWindowsPolicy on_time = cw;
  d = on_time.Decide({q, Millis(6), free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.batch_size, 4);
  EXPECT_EQ(on_time.cancelled(), 0);
  // It ran short (free at 4 ms): the worker waits for the planned start.
  ClockworkWindowsPolicy early = cw;
  d = early.Decide({q, Millis(4), free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.earliest, Millis(6));
  // Measured batches replace the profile's estimate: their median.
  CompletionTelemetry t;
  t.batch_size = 4;
  for (int ms : {3, 9, 4}) {
    t.exec = Millis(ms);
    cw.OnCompletion(t);
  }
  EXPECT_EQ(cw.Estimate(2), Millis(4));
}

TEST(NexusLikePolicyTest, PlansTheBatchFromTheMeanAndTheSlo) {
  ModelProfile p = DynamicProfile(0, 1, {1, 2, 4, 8}, {{"a", 1000, 2000}});
  NexusLikeOptions o;
  o.base.initial_overhead = 0;
  NexusLikePolicy nexus(p, o);
  EdfQueue q;
  for (QueryId id = 1; id <= 8; ++id) {
    Query x = Q(id, 0, 0, Millis(10));
    q.Push(x);
    nexus.OnArrival(x, 0);
  }
  // Mean 1.5 ms: 2 * l(b) <= 10 ms holds for b = 2 (6 ms), not 4 (12 ms).
  EXPECT_EQ(nexus.planned_batch_index(), 1);
  const int32_t free[] = {0};
  Decision d = nexus.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.batch_size, 2);
  EXPECT_EQ(d.take, 2);
  // Close to the head's deadline the batch shrinks, then the head is dropped.
  d = nexus.Decide({q, Millis(7.5), free, 1});
  EXPECT_EQ(d.batch_size, 1);
  d = nexus.Decide({q, Millis(8.9), free, 1});
  EXPECT_EQ(d.drop, 8);
}

TEST(DynamicBaselinesTest, RegisteredAsDynamicPoliciesThatNeedADynamicProfile) {
  RegisterBaselinePolicies();
  ModelProfile dyn = DynamicProfile(0, 1, {1, 2}, {{"a", 1000, 2000}});
  for (const char* name : {"clockwork", "clockwork-windows", "nexus"}) {
    const std::vector<std::string> names = DynamicPolicyNames();
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    auto p = MakePolicy(name, dyn, PolicyConfig{});
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    ModelProfile fixed = dyn;
    fixed.is_dynamic = false;
    fixed.dynamic = {};
    fixed.subnets.push_back(SubnetProfile{0, 70, {}, {Millis(1), Millis(2)}, 0});
    auto bad = MakePolicy(name, fixed, PolicyConfig{});
    ASSERT_FALSE(bad.ok()) << name;
    EXPECT_NE(bad.status().message().find("dynamic"), std::string_view::npos) << bad.status();
  }
}

}  // namespace
}  // namespace superserve
