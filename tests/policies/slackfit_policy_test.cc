#include "policies/slackfit_policy.h"

#include <vector>

#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

using testing::FillQueue;
using testing::HandProfile;
using testing::ThreeSubnetProfile;

SlackFitOptions Opts(int k, bool guard = false) {
  SlackFitOptions o;
  o.num_buckets = k;
  o.base.initial_overhead = 0;
  o.rate_guard = guard;
  return o;
}

const std::vector<int32_t> kWorkers = {2, 5};
constexpr Nanos kNow = Millis(1000);

Decision DecideWith(Policy* p, const EdfQueue& q, Nanos now = kNow, int32_t live = 2) {
  SchedulingContext ctx{q, now, absl::MakeConstSpan(kWorkers), live};
  return p->Decide(ctx);
}

TEST(LatencyBucketsTest, KeepsLargestBatchPerBucket) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy sf(p, Opts(4));
  const LatencyBuckets& b = sf.buckets();
  EXPECT_EQ(b.width(), Micros(4250));
  EXPECT_EQ(b.upper_bound(0), Millis(5.25));
  // (rank, batch index) per bucket.
  EXPECT_EQ(b.bucket_best(0).rank, 0);
  EXPECT_EQ(b.bucket_best(0).batch_index, 3);
  EXPECT_EQ(b.bucket_best(1).rank, 1);
  EXPECT_EQ(b.bucket_best(1).batch_index, 3);
  EXPECT_EQ(b.bucket_best(2).rank, 2);
  EXPECT_EQ(b.bucket_best(2).batch_index, 2);
  EXPECT_EQ(b.bucket_best(3).rank, 2);
  EXPECT_EQ(b.bucket_best(3).batch_index, 3);
}

TEST(SlackFitPolicyTest, PicksBucketJustBelowSlackWithFullBatch) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy sf(p, Opts(4));
  EdfQueue q;
  FillQueue(&q, 20, kNow + Millis(12));  // slack 12 ms: bucket 1 (upper 9.5 ms)
  Decision d = DecideWith(&sf, q);
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.drop, 0);
  EXPECT_EQ(d.subnet_index, 1);  // 75 %
  EXPECT_EQ(d.batch_size, 8);
  EXPECT_EQ(d.take, 8);
  EXPECT_EQ(d.worker, 2);  // lowest free id

  EdfQueue q2;
  FillQueue(&q2, 20, kNow + Millis(20));  // slack 20: top bucket
  d = DecideWith(&sf, q2);
  EXPECT_EQ(d.subnet_index, 2);
  EXPECT_EQ(d.batch_size, 8);
}

TEST(SlackFitPolicyTest, PartialBatchTakesMostAccurateSubnetThatFits) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy sf(p, Opts(4));
  EdfQueue q;
  FillQueue(&q, 3, kNow + Millis(12));
  Decision d = DecideWith(&sf, q);
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 3);
  EXPECT_EQ(d.batch_size, 4);     // smallest profiled batch >= 3
  EXPECT_EQ(d.subnet_index, 2);   // 80 % at batch 4 takes 10 ms <= 12
  EdfQueue q2;
  FillQueue(&q2, 3, kNow + Millis(8));  // 80 % no longer fits; 75 % at 4 = 5 ms
  d = DecideWith(&sf, q2);
  EXPECT_EQ(d.subnet_index, 1);
  EXPECT_EQ(d.batch_size, 4);
}

TEST(SlackFitPolicyTest, PaperStylePartialBatchKeepsTheBucketsSubnet) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitOptions o = Opts(4);
  o.partial_most_accurate = false;
  SlackFitPolicy sf(p, o);
  EXPECT_EQ(sf.name(), "slackfit-bp");
  EdfQueue q;
  FillQueue(&q, 3, kNow + Millis(12));  // bucket 1: (75 %, 8) -> (75 %, 4)
  Decision d = DecideWith(&sf, q);
  EXPECT_EQ(d.subnet_index, 1);
  EXPECT_EQ(d.batch_size, 4);
  EXPECT_EQ(d.take, 3);
}

TEST(SlackFitPolicyTest, DropsInfeasibleHeadThenServesTheRest) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy sf(p, Opts(4));
  EdfQueue q;
  q.Push({1, 0, 0, kNow + Micros(500)});   // below the fastest tuple (1 ms)
  q.Push({2, 0, 0, kNow + Micros(999)});
  q.Push({3, 0, 0, kNow + Millis(12)});
  Decision d = DecideWith(&sf, q);
  EXPECT_EQ(d.drop, 2);
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 1);
  EXPECT_EQ(d.batch_size, 1);
  EXPECT_EQ(d.subnet_index, 2);  // slack of query 3 (12 ms) fits 80 % at batch 1
}

TEST(SlackFitPolicyTest, DropsEverythingWhenAllInfeasibleAndIdlesWithoutWorkers) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy sf(p, Opts(4));
  EdfQueue q;
  FillQueue(&q, 4, kNow + Micros(100));
  Decision d = DecideWith(&sf, q);
  EXPECT_EQ(d.kind, Decision::Kind::kIdle);
  EXPECT_EQ(d.drop, 4);
  EdfQueue q2;
  FillQueue(&q2, 4, kNow + Millis(30));
  SchedulingContext none{q2, kNow, {}, 2};
  d = sf.Decide(none);
  EXPECT_EQ(d.kind, Decision::Kind::kIdle);
  EXPECT_EQ(d.drop, 0);
}

TEST(SlackFitPolicyTest, SlackBelowFirstBucketFallsBackToLargestBatchThatFits) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy sf(p, Opts(4));
  EdfQueue q;
  FillQueue(&q, 20, kNow + Millis(3));  // < 5.25 ms: no bucket bound fits
  Decision d = DecideWith(&sf, q);
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.subnet_index, 0);
  EXPECT_EQ(d.batch_size, 4);  // 2.5 ms <= 3 ms
}

TEST(SlackFitPolicyTest, TiesInBatchGoToHigherAccuracy) {
  ModelProfile p = HandProfile({1, 2}, {70, 71}, {{1, 2}, {1.1, 2.1}});
  SlackFitPolicy sf(p, Opts(1));
  EdfQueue q;
  FillQueue(&q, 5, kNow + Millis(3));
  Decision d = DecideWith(&sf, q);
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.subnet_index, 1);
  EXPECT_EQ(d.batch_size, 2);
}

TEST(SlackFitPolicyTest, EdfTiesTakeLowerIdsFirstAndDecisionsAreDeterministic) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy a(p, Opts(4)), b(p, Opts(4));
  EdfQueue q;
  for (QueryId id : {9, 3, 7, 1}) q.Push({id, 0, 0, kNow + Millis(12)});
  Decision da = DecideWith(&a, q), db = DecideWith(&b, q);
  EXPECT_EQ(da.subnet_index, db.subnet_index);
  EXPECT_EQ(da.batch_size, db.batch_size);
  EXPECT_EQ(da.take, 4);
  EXPECT_EQ(q.Head().id, 1u);
}

TEST(SlackFitPolicyTest, CorrectsLatencyFromTelemetryAndRebuildsBuckets) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy sf(p, Opts(4));
  // (80 %, batch 8) really takes 30 ms, not 18.
  for (int i = 0; i < 16; ++i) {
    CompletionTelemetry t{0, 2, 8, Millis(30), 0, Millis(100 + i)};
    sf.OnCompletion(t);
  }
  EXPECT_EQ(sf.latencies().latency(2, 3), Millis(30));
  EdfQueue q;
  FillQueue(&q, 20, kNow + Millis(20));
  Decision d = DecideWith(&sf, q);
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  // Buckets over [1, 30]: width 7.25, slack 20 -> bucket 1 -> (75 %, 8).
  EXPECT_EQ(d.subnet_index, 1);
  EXPECT_EQ(d.batch_size, 8);
}

TEST(SlackFitPolicyTest, OverheadEstimateComesFromTelemetry) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy sf(p, Opts(4));
  for (int i = 0; i < 10; ++i) sf.OnCompletion({0, 0, 1, Millis(1), Millis(3), Millis(i)});
  EXPECT_EQ(sf.overhead_estimate(), Millis(3));
  EdfQueue q;
  FillQueue(&q, 20, kNow + Millis(12));  // slack 12 - 3 = 9 ms: bucket 0
  Decision d = DecideWith(&sf, q);
  EXPECT_EQ(d.subnet_index, 0);
  EXPECT_EQ(d.batch_size, 8);
  EdfQueue q2;
  FillQueue(&q2, 1, kNow + Millis(3.5));  // 3.5 - 3 < 1 ms: infeasible now
  EXPECT_EQ(DecideWith(&sf, q2).drop, 1);
}

// Feeds `n` arrivals evenly spread over the 100 ms before kNow.
void Arrivals(Policy* p, int n) {
  for (int i = 0; i < n; ++i) {
    Nanos t = kNow - Millis(100) + Millis(100) * (i + 1) / n;
    p->OnArrival({static_cast<QueryId>(1000 + i), 0, t, t + Millis(36)}, t);
  }
}

TEST(RateGuardedSlackFitTest, KeepsSlackFitChoiceUnderLightLoad) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy rg(p, Opts(4, /*guard=*/true));
  EXPECT_EQ(rg.name(), "slackfit-rg");
  Arrivals(&rg, 10);  // 100 q/s over 2 workers
  EdfQueue q;
  FillQueue(&q, 20, kNow + Millis(20));
  Decision d = DecideWith(&rg, q);
  EXPECT_EQ(d.subnet_index, 2);  // 80 %, batch 8: 444 q/s >= 110
  EXPECT_EQ(d.batch_size, 8);
}

TEST(RateGuardedSlackFitTest, StepsDownToMostAccurateTupleThatKeepsUp) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy rg(p, Opts(4, true));
  Arrivals(&rg, 120);  // 1200 q/s over 2 workers: need 600 each
  EdfQueue q;
  FillQueue(&q, 20, kNow + Millis(20));
  Decision d = DecideWith(&rg, q);
  EXPECT_EQ(d.subnet_index, 1);  // 75 % at 8: 889 q/s; 80 % at 8 only 444
  EXPECT_EQ(d.batch_size, 8);
  SlackFitPolicy rg2(p, Opts(4, true));
  Arrivals(&rg2, 200);  // 2000 q/s: need 1000 each; only 70 % keeps up
  d = DecideWith(&rg2, q);
  EXPECT_EQ(d.subnet_index, 0);
  EXPECT_EQ(d.batch_size, 8);
}

TEST(RateGuardedSlackFitTest, FallsBackToMaximumThroughputUnderOverload) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy rg(p, Opts(4, true));
  Arrivals(&rg, 5000);  // 50k q/s: nothing keeps up
  EdfQueue q;
  FillQueue(&q, 20, kNow + Millis(20));
  Decision d = DecideWith(&rg, q);
  EXPECT_EQ(d.subnet_index, 0);
  EXPECT_EQ(d.batch_size, 8);
  // Plain SlackFit on the same queue keeps the slow, accurate tuple.
  SlackFitPolicy sf(p, Opts(4));
  EXPECT_EQ(DecideWith(&sf, q).subnet_index, 2);
}

TEST(RateGuardedSlackFitTest, WaitsForAFullerBatchWhenNothingSustainsTheRateNow) {
  ModelProfile p = ThreeSubnetProfile();
  SlackFitPolicy rg(p, Opts(4, true));
  Arrivals(&rg, 240);  // 2400 q/s over 2 workers: 1200 each; batch 1 gives 1000
  EdfQueue q;
  FillQueue(&q, 1, kNow + Millis(20));
  Decision d = DecideWith(&rg, q);
  ASSERT_EQ(d.kind, Decision::Kind::kWakeAt);
  // (70 %, batch 2) sustains 1333 q/s; one more arrival takes 1/2400 s.
  EXPECT_NEAR(static_cast<double>(d.wake_at - kNow), 1e9 / 2400, 1e4);
  // With two queued, it runs that tuple at once.
  EdfQueue q2;
  FillQueue(&q2, 2, kNow + Millis(20));
  d = DecideWith(&rg, q2);
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.subnet_index, 0);
  EXPECT_EQ(d.batch_size, 2);
}

TEST(RateGuardedSlackFitTest, ShedsHeadQueriesUnderSustainedOverloadToRunAFullBatch) {
  ModelProfile p = ThreeSubnetProfile();
  for (double fraction : {0.9, 100.0}) {
    SlackFitOptions o = Opts(4, true);
    o.shed_load_fraction = fraction;
    SlackFitPolicy rg(p, o);
    // 5000 q/s for a whole second: above 0.9 x the best capacity of two
    // workers (2 x 8 / 4.5 ms = 3556 q/s).
    for (int i = 0; i < 5000; ++i) {
      Nanos t = kNow - Seconds(1) + Micros(200) * (i + 1);
      rg.OnArrival({static_cast<QueryId>(10000 + i), 0, t, t + Millis(36)}, t);
    }
    EdfQueue q;
    for (QueryId id = 1; id <= 5; ++id) q.Push({id, 0, 0, kNow + Millis(2)});
    for (QueryId id = 6; id <= 25; ++id) q.Push({id, 0, 0, kNow + Millis(20)});
    Decision d = DecideWith(&rg, q);
    ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
    EXPECT_EQ(d.subnet_index, 0);
    if (fraction < 1) {
      // Shed the five heads only a batch of <= 2 could serve; run 8.
      EXPECT_EQ(d.drop, 5);
      EXPECT_EQ(d.batch_size, 8);
      EXPECT_EQ(d.take, 8);
    } else {
      // Shedding disabled: the highest throughput that fits 2 ms.
      EXPECT_EQ(d.drop, 0);
      EXPECT_EQ(d.batch_size, 2);
    }
  }
}

TEST(PolicyFactoryTest, BuildsEveryPolicyAndRejectsBadNames) {
  ModelProfile p = ThreeSubnetProfile();
  PolicyConfig c;
  for (const auto& name : PolicyNames()) {
    c.fixed_subnet_id = 101;
    auto policy = MakePolicy(name, p, c);
    ASSERT_TRUE(policy.ok()) << name << ": " << policy.status();
  }
  EXPECT_FALSE(MakePolicy("nope", p, c).ok());
  c.fixed_subnet_id = 7;
  EXPECT_FALSE(MakePolicy("clipper+", p, c).ok());
}

}  // namespace
}  // namespace superserve
