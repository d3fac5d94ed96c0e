// Orloj for dynamic models, on hand-built cases; the distribution pieces it
// rests on (estimator, product CDF, score). Its baselines (Clockwork-like,
// Nexus-like): tests/bench/baselines/dynamic_baselines_test.cc.
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "policies/batch_time_model.h"
#include "policies/execution_time_estimator.h"
#include "policies/orloj_policy.h"
#include "policies/orloj_score.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

using testing::App;
using testing::DynamicProfile;

EmpiricalDistribution Uniform(double lo, double hi) {
  return *EmpiricalDistribution::FromHistogram({lo, hi}, {1});
}

Query Q(QueryId id, int32_t app, Nanos arrival, Nanos deadline) {
  return Query{id, app, arrival, deadline};
}

// --- estimator

TEST(ExecutionTimeEstimatorTest, TheWindowFollowsAShiftInTheInputMix) {
  DynamicModelProfile prof;
  prof.applications.push_back({"a", {1000, 2000}, {1}});
  prof.applications.push_back({"b", {1000, 2000}, {1}});
  ExecutionTimeEstimator::Options o;
  o.window = 200;
  o.min_samples = 50;
  o.share_window = 100;
  ExecutionTimeEstimator e(prof, o);
  EXPECT_NEAR(e.Distribution(0).Mean(), 1500, 1e-9) << "the profile until measured";
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> slow(5000, 6000), fast(1000, 1100);
  for (int i = 0; i < 49; ++i) e.AddSample(0, slow(rng));
  EXPECT_NEAR(e.Distribution(0).Mean(), 1500, 1e-9) << "below min_samples";
  for (int i = 0; i < 151; ++i) e.AddSample(0, slow(rng));
  EXPECT_NEAR(e.Distribution(0).Mean(), 5500, 60);
  EXPECT_GT(e.Distribution(0).Quantile(0.05), 5000);
  // The input shifts back: after one window the old samples are gone.
  for (int i = 0; i < 200; ++i) e.AddSample(0, fast(rng));
  EXPECT_NEAR(e.Distribution(0).Mean(), 1050, 10);
  EXPECT_LT(e.Distribution(0).Quantile(0.99), 1101);
  EXPECT_NEAR(e.Distribution(1).Mean(), 1500, 1e-9) << "other applications keep theirs";
  // The mix: equal by profile counts, then by recent arrivals.
  EXPECT_NEAR(e.Shares()[0], 0.5, 1e-12);
  for (int i = 0; i < 100; ++i) e.AddArrival(0);
  EXPECT_NEAR(e.Shares()[0], 1.0, 1e-12);
  for (int i = 0; i < 75; ++i) e.AddArrival(1);
  EXPECT_NEAR(e.Shares()[1], 0.75, 1e-12);
}

TEST(BatchTimeModelTest, CdfOfTheMaxIsTheProductOfCdfs) {
  EmpiricalDistribution u = Uniform(0, 1), w = Uniform(0, 2);
  EXPECT_NEAR(MaxCdf(u, u, 3, 0.5), 0.125, 1e-12);
  EXPECT_NEAR(MaxCdf(u, w, 2, 0.5), 0.5 * 0.25, 1e-12);
  const EmpiricalDistribution* parts[] = {&u, &w, &w};
  EXPECT_NEAR(MaxCdf(parts, 1.0), 1.0 * 0.5 * 0.5, 1e-12);
  // Against sampling: the max of one u and two w draws.
  std::mt19937_64 rng(11);
  int below = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double m = std::max({u.Sample(rng), w.Sample(rng), w.Sample(rng)});
    below += m <= 0.8;
  }
  EXPECT_NEAR(static_cast<double>(below) / n, MaxCdf(parts, 0.8), 0.005);
  EXPECT_NEAR(ExpectedMax(u, 1), 0.5, 1e-9);
  EXPECT_NEAR(ExpectedMax(u, 2), 2.0 / 3, 1e-9);
  EXPECT_NEAR(ExpectedMax(u, 4), 0.8, 1e-9);
  EXPECT_NEAR(ExpectedMax(*EmpiricalDistribution::FromHistogram({0, 1, 3}, {1, 1}), 2),
              // E[max] = integral of 1 - F^2 over [0, 3] with F piecewise linear.
              3 - (0.25 / 3) - (1.0 / (3 * 0.25)) * (1 - 0.125), 1e-9);
  BatchTimeModel m{500, 0.5};
  EXPECT_DOUBLE_EQ(m.Latency(4, 1000), 500 + 0.5 * 4 * 1000);
}

// (1/E) * integral over l < x of f(l) e^{-b (x - l)} dl: the expected cost
// saved by running now instead of after an Exp(b) delay (Eq. 1), by brute
// force.
double BruteForceScore(const EmpiricalDistribution& batch_time, double x, double b, double mean) {
  const int steps = 200000;
  const double lo = batch_time.min(), hi = std::min(x, batch_time.max());
  if (hi <= lo) return 0;
  const double dl = (hi - lo) / steps;
  double sum = 0;
  for (int i = 0; i < steps; ++i) {
    const double l = lo + (i + 0.5) * dl;
    const double f = (batch_time.Cdf(l + dl / 2) - batch_time.Cdf(l - dl / 2)) / dl;
    sum += f * std::exp(-b * (x - l)) * dl;
  }
  return sum / mean;
}

TEST(OrlojScoreTest, ScoreMatchesTheExpectedCostReduction) {
  EmpiricalDistribution own = Uniform(1000, 3000);
  OrlojScoreTable::Params params;
  params.b_per_us = 1e-3;  // a visible urgency term
  params.viable_quantile = 0;
  params.grid_bins = 16;
  const BatchTimeModel model{0, 1};
  OrlojScoreTable t = OrlojScoreTable::Build(own, own, 1, model, 2000, params);
  for (double x : {999.0, 1000.0, 1500.0, 2222.0, 2999.0, 3000.0, 5000.0}) {
    const double want = BruteForceScore(own, x, params.b_per_us, 2000);
    const int32_t g = t.Group(x);
    if (x < 1000) {
      EXPECT_EQ(g, -1);
      continue;
    }
    // alpha * e^{bt} + beta with relative timestamps: any base gives the
    // same score.
    for (double base_shift : {0.0, 12345.0}) {
      const double d = base_shift + x, now = base_shift;
      EXPECT_NEAR(t.Score(g, d, now), want, 1e-6 * std::max(1.0, want)) << "x=" << x;
    }
  }
  // Longer time left: a higher chance now, and the delay hurts less; the
  // score first rises (chance) and then falls (less urgent).
  EXPECT_LT(t.Score(t.Group(1500), 1500, 0), t.Score(t.Group(3000), 3000, 0));
  EXPECT_GT(t.Score(t.Group(3000), 3000, 0), t.Score(t.Group(8000), 8000, 0));
}

TEST(OrlojScoreTest, BatchTimeUsesTheProductCdfAndViability) {
  EmpiricalDistribution own = Uniform(1000, 2000), mix = Uniform(1000, 3000);
  OrlojScoreTable::Params params;
  params.viable_quantile = 0.5;
  const BatchTimeModel model{100, 0.5};
  OrlojScoreTable t = OrlojScoreTable::Build(own, mix, 4, model, 1, params);
  // P(batch <= 100 + 0.5*4*y) = own(y) * mix(y)^3.
  for (double y : {1200.0, 1500.0, 1900.0, 2500.0}) {
    EXPECT_NEAR(t.SuccessProbability(model.Latency(4, y)), MaxCdf(own, mix, 4, y), 1e-2)
        << "y=" << y;
  }
  EXPECT_NEAR(t.SuccessProbability(t.viable_from()), 0.5, 1e-6);
  EXPECT_EQ(t.Group(t.viable_from() - 1), -1);
  EXPECT_GE(t.Group(t.viable_from()), 0);
}

TEST(OrlojScoreTest, DefaultsToTheRequestsOwnMeanAndADelayOfThreeBatches) {
  // b = 0: E[L_B] is the histogram's own (Eq. 1 and 5) and b = 1 / (3 E[L_B]),
  // so a request sure to finish (x beyond the histogram) scores
  // E[e^{-b (x - L)}] / E[L] = e^{-bx} (e^{b(a+w)} - e^{ba}) / (b w E[L]), L on [a, a+w).
  OrlojScoreTable::Params params;
  params.viable_quantile = 0;
  const BatchTimeModel model{0, 1};
  struct Case {
    double a, w, x, want;
  };
  for (const Case& c : {Case{1000, 100, 4000, 3.7334359806e-4},
                       Case{5000, 100, 20000, 7.3815605891e-5}}) {
    EmpiricalDistribution own = Uniform(c.a, c.a + c.w);
    OrlojScoreTable t = OrlojScoreTable::Build(own, own, 1, model, 0, params);
    EXPECT_NEAR(t.b(), 1 / (3 * (c.a + c.w / 2)), 1e-12);
    EXPECT_NEAR(t.Score(t.Group(c.x), c.x, 0), c.want, 1e-6 * c.want) << "a=" << c.a;
  }
  // Batched with the mix: E[L_B] = 2 E[max(own, mix)] with own on [1000, 2000)
  // and mix on [1000, 3000): 1000 + (1000 - 1000/6) + (1000 - 750) = 2083.3.
  OrlojScoreTable t2 = OrlojScoreTable::Build(Uniform(1000, 2000), Uniform(1000, 3000), 2, model,
                                              0, params);
  EXPECT_NEAR(1 / (3 * t2.b()), 2 * 2083.333, 2);
}

// --- Orloj decisions

TEST(OrlojPolicyTest, PicksTheLargestFullBatchSizeAsThePseudocodeWrites) {
  // One application, ~1 ms per query, 1 ms per batch: k queries take 1 + k
  // ms, so every larger batch takes less time per query (all efficient).
  ModelProfile p = DynamicProfile(1000, 1, {1, 2, 4}, {{"a", 1000, 1100}});
  OrlojOptions o;
  o.base.initial_overhead = 0;
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "a");
  EdfQueue q;
  const int32_t free[] = {7};
  // Two urgent queries (2.5 ms left: only a batch of one makes it) and two
  // relaxed ones.
  for (QueryId id : {1, 2}) {
    Query x = Q(id, 0, 0, Micros(2500));
    q.Push(x);
    orloj.OnArrival(x, 0);
  }
  for (QueryId id : {3, 4}) {
    Query x = Q(id, 0, 0, Millis(100));
    q.Push(x);
    orloj.OnArrival(x, 0);
  }
  EXPECT_EQ(orloj.queued(0), 4);
  EXPECT_EQ(orloj.queued(1), 2);
  EXPECT_EQ(orloj.queued(2), 2);
  Decision d = orloj.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  // Ordered by (earliest deadline in Q_bs, bs) descending, the first with
  // |Q_bs| >= bs: Q_4 has 2 (not full), Q_2 = {3, 4} is.
  EXPECT_EQ(d.batch_size, 2);
  EXPECT_EQ(d.worker, 7);
  EXPECT_EQ(d.subnet_index, -1);
  EXPECT_EQ(d.take, 2);
  std::vector<QueryId> ids = d.take_ids;
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<QueryId>{3, 4}));
  EXPECT_EQ(orloj.queued(0), 2) << "taken requests leave every queue";
  // Now only the urgent two: batch size 1 (Q_2 holds none of them).
  d = orloj.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.batch_size, 1);
  EXPECT_EQ(d.take_ids.size(), 1u);
}

TEST(OrlojPolicyTest, APartialBatchOfALargerSizeRunsWhatTheSmallerCannotHold) {
  // Profiled sizes 1, 2, 4; three relaxed requests: a batch of two would
  // leave one behind, so Q_4 (3 > 2, what Q_2 holds) runs them as one batch
  // of three (a dynamic batch runs unpadded).
  ModelProfile p = DynamicProfile(1000, 1, {1, 2, 4}, {{"a", 1000, 1100}});
  OrlojOptions o;
  o.base.initial_overhead = 0;
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "a");
  EdfQueue q;
  for (QueryId id : {1, 2, 3}) {
    Query x = Q(id, 0, 0, Millis(100));
    q.Push(x);
    orloj.OnArrival(x, 0);
  }
  const int32_t free[] = {0};
  Decision d = orloj.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.batch_size, 4);
  EXPECT_EQ(d.take, 3);
  EXPECT_EQ(d.take_ids.size(), 3u);
}

TEST(OrlojPolicyTest, NeverPicksABatchSizeThatTakesMoreTimePerQuery) {
  // No batch overhead and a spread of times: a batch of k takes k * max(l),
  // more per query than k batches of one (E[max] > E[l]), so batch size 2 is
  // not efficient even when Q_2 is full.
  ModelProfile p = DynamicProfile(0, 1, {1, 2}, {{"a", 1000, 3000}});
  OrlojOptions o;
  o.base.initial_overhead = 0;
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "a");
  EdfQueue q;
  const int32_t free[] = {0};
  for (QueryId id : {1, 2, 3, 4}) {
    Query x = Q(id, 0, 0, Millis(100));
    q.Push(x);
    orloj.OnArrival(x, 0);
  }
  ASSERT_EQ(orloj.queued(1), 4) << "every request is viable for a batch of two";
  Decision d = orloj.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.batch_size, 1);
  EXPECT_EQ(d.take_ids.size(), 1u);
  // With a 2 ms batch overhead a batch of two is efficient again (2 + 2 *
  // E[max] per two queries against 2 + E[l] per one).
  ModelProfile with_c0 = DynamicProfile(2000, 1, {1, 2}, {{"a", 1000, 3000}});
  OrlojPolicy batched(with_c0, o);
  batched.OnApplicationNamed(0, "a");
  for (QueryId id : {1, 2, 3, 4}) batched.OnArrival(Q(id, 0, 0, Millis(100)), 0);
  d = batched.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.batch_size, 2);
}

TEST(OrlojPolicyTest, TheDispatchOverheadCountsAgainstTheTimeLeft) {
  // ~1 ms per query; the median batch of one is 1.05 ms. With 0.5 ms of
  // dispatch overhead a request with 1.3 ms left cannot make it.
  ModelProfile p = DynamicProfile(0, 1, {1}, {{"a", 1000, 1100}});
  OrlojOptions o;
  o.base.initial_overhead = Micros(500);
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "a");
  orloj.OnArrival(Q(1, 0, 0, Micros(1300)), 0);
  orloj.OnArrival(Q(2, 0, 0, Micros(1700)), 0);
  EXPECT_EQ(orloj.ScoreOf(1, 0, 0), -1) << "1.3 - 0.5 ms left: below the median batch";
  EXPECT_GE(orloj.ScoreOf(2, 0, 0), 0) << "1.7 - 0.5 ms left: viable";
  EXPECT_EQ(orloj.queued(0), 1);
  o.base.initial_overhead = 0;
  OrlojPolicy no_overhead(p, o);
  no_overhead.OnApplicationNamed(0, "a");
  no_overhead.OnArrival(Q(1, 0, 0, Micros(1300)), 0);
  EXPECT_EQ(no_overhead.queued(0), 1);
}

// Load-adaptive exits: one application "a", uniform per threshold on
// 0.6: [1000, 1200), 0.8: [1000, 2000), 0.9 (the default): [2000, 3000) us.
ModelProfile ThresholdProfile(double c0_us, std::vector<int32_t> batches) {
  ModelProfile p = DynamicProfile(c0_us, 1, std::move(batches), {{"a", 2000, 3000}});
  p.dynamic.default_threshold = 0.9;
  const double lo[] = {1000, 1000, 2000}, hi[] = {1200, 2000, 3000}, th[] = {0.6, 0.8, 0.9};
  for (int t = 0; t < 3; ++t) {
    p.dynamic.thresholds.push_back({th[t], 80.0 + t, {{"a", {lo[t], hi[t]}, {100}}}});
  }
  return p;
}

int32_t ThresholdForOne(const ModelProfile& p, Nanos deadline) {
  OrlojOptions o;
  o.base.initial_overhead = 0;
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "a");
  EdfQueue q;
  Query x = Q(1, 0, 0, deadline);
  q.Push(x);
  orloj.OnArrival(x, 0);
  const int32_t free[] = {0};
  Decision d = orloj.Decide({q, 0, free, 1});
  EXPECT_EQ(d.kind, Decision::Kind::kDispatch) << ToMicros(deadline) << " us";
  return d.exit_threshold_index;
}

TEST(OrlojPolicyTest, PicksTheHighestExitThresholdThatMeetsTheDeadline) {
  // Batch of one, no overheads, nothing else queued: the highest threshold
  // that meets the deadline as surely as the lowest does (P(l <= x), the
  // lowest's at least viable_quantile = 0.5). x = 10 ms: 0.9's P = 1.
  // x = 2.4 ms: 0.9's 0.4, 0.8's 1 = the lowest's. x = 2 ms: 0.9's 0, 0.8's 1.
  // x = 1.6 ms: 0.8's 0.6 against the lowest's 1: the lowest.
  ModelProfile p = ThresholdProfile(0, {1});
  EXPECT_EQ(ThresholdForOne(p, Millis(10)), 2) << "light load: the highest";
  EXPECT_EQ(ThresholdForOne(p, Micros(2400)), 1);
  EXPECT_EQ(ThresholdForOne(p, Micros(2000)), 1);
  EXPECT_EQ(ThresholdForOne(p, Micros(1600)), 0);
  EXPECT_EQ(ThresholdForOne(p, Micros(1150)), 0) << "the lowest's P = 0.75: viable, and run";
  // Without per-threshold data the batch runs at the model's default.
  EXPECT_EQ(ThresholdForOne(DynamicProfile(0, 1, {1}, {{"a", 2000, 3000}}), Millis(10)), -1);
}

TEST(OrlojPolicyTest, TheNextQueuedRequestLowersTheExitThreshold) {
  // Batch size 1, two requests with 4 ms left. Alone, 0.9 meets 4 ms
  // surely. With the other still queued, the batch must also leave it its
  // median time alone at the lowest threshold (1.1 ms): 2.9 ms, which 0.9
  // meets with P = 0.9 and 0.8 (like the lowest) with 1.
  ModelProfile p = ThresholdProfile(0, {1});
  EXPECT_EQ(ThresholdForOne(p, Millis(4)), 2);
  OrlojOptions o;
  o.base.initial_overhead = 0;
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "a");
  EdfQueue q;
  for (QueryId id : {1, 2}) {
    Query x = Q(id, 0, 0, Millis(4));
    q.Push(x);
    orloj.OnArrival(x, 0);
  }
  const int32_t free[] = {0};
  Decision d = orloj.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take, 1);
  EXPECT_EQ(d.exit_threshold_index, 1);
}

TEST(OrlojPolicyTest, TheExitThresholdIsPickedForTheWholeBatch) {
  // c0 = 1 ms: a batch of two takes 1 + 2 * max(l) ms (efficient: 1.63 ms
  // per query at the lowest threshold against 2.1 alone). Two requests with
  // 6 ms left: max(l) <= 2.5 ms with probability 0.5^2 = 0.25 at 0.9, 1 at
  // 0.8 and 0.6; with 7.4 ms left, max(l) <= 3.2 ms: 1 at 0.9.
  for (const auto& [deadline, want] :
       std::vector<std::pair<Nanos, int32_t>>{{Micros(6000), 1}, {Micros(7400), 2}}) {
    ModelProfile p = ThresholdProfile(1000, {1, 2});
    OrlojOptions o;
    o.base.initial_overhead = 0;
    OrlojPolicy orloj(p, o);
    orloj.OnApplicationNamed(0, "a");
    EdfQueue q;
    for (QueryId id : {1, 2}) {
      Query x = Q(id, 0, 0, deadline);
      q.Push(x);
      orloj.OnArrival(x, 0);
    }
    const int32_t free[] = {0};
    Decision d = orloj.Decide({q, 0, free, 1});
    ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
    EXPECT_EQ(d.take, 2);
    EXPECT_EQ(d.exit_threshold_index, want) << ToMicros(deadline) << " us";
  }
}

TEST(OrlojPolicyTest, WithExitThresholdsQueuesPlanWithTheLowestThreshold) {
  // 1.15 ms left: viable at 0.6 (median 1.1 ms), at no other threshold.
  ModelProfile p = ThresholdProfile(0, {1});
  OrlojOptions o;
  o.base.initial_overhead = 0;
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "a");
  orloj.OnArrival(Q(1, 0, 0, Micros(1150)), 0);
  EXPECT_EQ(orloj.queued(0), 1);
  EXPECT_NEAR(ExecutionTimeEstimator(orloj.estimator()).Distribution(0).Mean(), 1100, 1e-9);
  // Telemetry of batches at another threshold leaves the estimate alone;
  // at the lowest it moves it (past min_samples = 100).
  CompletionTelemetry t;
  t.exit_threshold_index = 2;
  for (QueryId id = 0; id < 150; ++id) t.queries.push_back({id, 0, Micros(5000), 2});
  orloj.OnCompletion(t);
  EXPECT_NEAR(ExecutionTimeEstimator(orloj.estimator()).Distribution(0).Mean(), 1100, 1e-9);
  t.exit_threshold_index = 0;
  orloj.OnCompletion(t);
  EXPECT_NEAR(ExecutionTimeEstimator(orloj.estimator()).Distribution(0).Mean(), 5000, 1);
}

TEST(OrlojPolicyTest, PopsTheTopScoredRequestNotTheEdfHead) {
  // Short (1 ms) and long (5 ms) applications, batch size 1.
  ModelProfile p =
      DynamicProfile(0, 1, {1}, {{"short", 1000, 1100}, {"long", 5000, 5100}});
  OrlojOptions o;
  o.score.viable_quantile = 0.05;
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "short");
  orloj.OnApplicationNamed(1, "long");
  EdfQueue q;
  const int32_t free[] = {0};
  // The EDF head is a long request with an even chance (5.05 ms left); a
  // short one has 20 ms and is sure to make it.
  const Query hopeless = Q(1, 1, 0, Micros(500));
  const Query risky = Q(2, 1, 0, Micros(5050));
  const Query sure = Q(3, 0, 0, Millis(20));
  for (const Query& x : {hopeless, risky, sure}) {
    q.Push(x);
    orloj.OnArrival(x, 0);
  }
  EXPECT_GT(orloj.ScoreOf(3, 0, 0), orloj.ScoreOf(2, 0, 0));
  Decision d = orloj.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.drop, 1) << "no batch can save the 0.5 ms one (fastest is 1 ms)";
  EXPECT_EQ(d.take_ids, std::vector<QueryId>{3});
}

TEST(OrlojPolicyTest, FarFromTheirDeadlinesTheEarliestGoesFirst) {
  // Two applications of ~1 ms each, batch size 1. Ten and twenty seconds
  // left are thousands of batch times: both scores underflow to 0.
  ModelProfile p = DynamicProfile(0, 1, {1}, {{"a", 1000, 1100}, {"b", 1000, 1100}});
  OrlojPolicy orloj(p, OrlojOptions());
  orloj.OnApplicationNamed(0, "a");
  orloj.OnApplicationNamed(1, "b");
  EdfQueue q;
  const Query later = Q(1, 0, 0, Seconds(20));   // application 0
  const Query sooner = Q(2, 1, 0, Seconds(10));  // application 1
  for (const Query& x : {later, sooner}) {
    q.Push(x);
    orloj.OnArrival(x, 0);
  }
  ASSERT_EQ(orloj.ScoreOf(1, 0, 0), 0);
  ASSERT_EQ(orloj.ScoreOf(2, 0, 0), 0);
  const int32_t free[] = {0};
  Decision d = orloj.Decide({q, 0, free, 1});
  ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
  EXPECT_EQ(d.take_ids, std::vector<QueryId>{2});
}

TEST(OrlojPolicyTest, TheBatchIsTheTopScoredOfItsQueueByBruteForce) {
  ModelProfile p =
      DynamicProfile(3000, 0.4, {1, 2, 4, 8}, {{"s", 1000, 3000}, {"l", 5000, 12000}});
  OrlojOptions o;
  o.score.b_per_us = 1e-4;  // urgency matters as much as the chance
  OrlojPolicy orloj(p, o);
  orloj.OnApplicationNamed(0, "s");
  orloj.OnApplicationNamed(1, "l");
  std::mt19937_64 rng(9);
  EdfQueue q;
  std::vector<QueryId> ids;
  for (QueryId id = 1; id <= 400; ++id) {
    Query x = Q(id, static_cast<int32_t>(rng() % 2), 0,
                Micros(2000 + static_cast<double>(rng() % 40000)));
    q.Push(x);
    orloj.OnArrival(x, 0);
    ids.push_back(id);
  }
  const int32_t free[] = {0};
  for (Nanos now : {Millis(1), Millis(4), Millis(9)}) {
    orloj.Decide({q, now, {}, 1});  // milestones up to now
    std::vector<std::vector<double>> before(4);
    for (size_t b = 0; b < 4; ++b) {
      for (QueryId id : ids) before[b].push_back(orloj.ScoreOf(id, b, now));
    }
    Decision d = orloj.Decide({q, now, free, 1});
    ASSERT_EQ(d.kind, Decision::Kind::kDispatch);
    const size_t b = std::find(p.batch_sizes.begin(), p.batch_sizes.end(), d.batch_size) -
                     p.batch_sizes.begin();
    ASSERT_EQ(static_cast<int32_t>(d.take_ids.size()), d.batch_size);
    double worst_taken = 1e300, best_left = -1;
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool taken =
          std::find(d.take_ids.begin(), d.take_ids.end(), ids[i]) != d.take_ids.end();
      if (taken) {
        ASSERT_GE(before[b][i], 0) << "a taken request was in Q_bs";
        worst_taken = std::min(worst_taken, before[b][i]);
      } else {
        best_left = std::max(best_left, before[b][i]);
      }
    }
    EXPECT_GE(worst_taken, best_left) << "at " << now;
    std::vector<Query> out;
    for (int32_t k = 0; k < d.drop; ++k) q.Pop();
    q.TakeIds(d.take_ids, &out);
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](QueryId id) {
                               return std::find(d.take_ids.begin(), d.take_ids.end(), id) !=
                                      d.take_ids.end();
                             }),
              ids.end());
  }
}

TEST(OrlojPolicyTest, MilestonesMoveRequestsOutOfBatchSizesTheyCannotMake) {
  ModelProfile p = DynamicProfile(0, 1, {1, 2}, {{"a", 1000, 1100}});
  OrlojPolicy orloj(p, OrlojOptions{});
  orloj.OnApplicationNamed(0, "a");
  EdfQueue q;
  const Query x = Q(1, 0, 0, Millis(3));
  q.Push(x);
  orloj.OnArrival(x, 0);
  EXPECT_EQ(orloj.queued(1), 1) << "3 ms left: a batch of two (~2.1 ms) fits";
  orloj.Decide({q, Millis(1), {}, 1});  // no free worker: only bookkeeping
  EXPECT_EQ(orloj.queued(1), 0) << "2 ms left: it no longer does";
  EXPECT_EQ(orloj.queued(0), 1);
  orloj.Decide({q, Micros(2000), {}, 1});
  EXPECT_EQ(orloj.queued(0), 0) << "1 ms left: below the median time of one";
}

TEST(OrlojPolicyTest, RelativeTimestampsResetWithoutChangingDecisions) {
  ModelProfile p =
      DynamicProfile(200, 0.5, {1, 2, 4}, {{"s", 1000, 2000}, {"l", 4000, 8000}});
  OrlojOptions often;
  often.max_exponent = 1e-9;  // re-base at every decision
  OrlojPolicy a(p, OrlojOptions{}), b(p, often);
  for (auto* x : {&a, &b}) {
    x->OnApplicationNamed(0, "s");
    x->OnApplicationNamed(1, "l");
  }
  std::mt19937_64 rng(5);
  EdfQueue qa, qb;
  const int32_t free[] = {0};
  Nanos now = Seconds(100);
  for (int i = 1; i <= 300; ++i) {
    now += Micros(std::uniform_int_distribution<int>(0, 3000)(rng));
    Query x = Q(i, i % 2, now, now + Millis(std::uniform_int_distribution<int>(5, 30)(rng)));
    qa.Push(x);
    qb.Push(x);
    a.OnArrival(x, now);
    b.OnArrival(x, now);
    if (i % 3 == 0) {
      Decision da = a.Decide({qa, now, free, 1}), db = b.Decide({qb, now, free, 1});
      ASSERT_EQ(da.take_ids, db.take_ids) << "decision " << i;
      ASSERT_EQ(da.drop, db.drop);
      EXPECT_EQ(b.base(), now);
      std::vector<Query> out;
      for (int k = 0; k < da.drop; ++k) {
        qa.Pop();
        qb.Pop();
      }
      qa.TakeIds(da.take_ids, &out);
      qb.TakeIds(db.take_ids, &out);
    }
  }
}

// --- baselines

TEST(DynamicPolicyFactoryTest, DynamicPoliciesNeedADynamicProfile) {
  ModelProfile dyn = DynamicProfile(0, 1, {1, 2}, {{"a", 1000, 2000}});
  for (const std::string& name : DynamicPolicyNames()) {
    auto p = MakePolicy(name, dyn, PolicyConfig{});
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ((*p)->name(), name);
  }
  EXPECT_FALSE(MakePolicy("ratefit", dyn, PolicyConfig{}).ok()) << "no subnets";
  ModelProfile fixed = dyn;
  fixed.is_dynamic = false;
  fixed.dynamic = {};
  fixed.subnets.push_back(SubnetProfile{0, 70, {}, {Millis(1), Millis(2)}, 0});
  auto p = MakePolicy("orloj", fixed, PolicyConfig{});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("dynamic"), std::string_view::npos);
}

}  // namespace
}  // namespace superserve
