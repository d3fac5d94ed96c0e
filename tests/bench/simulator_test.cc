#include "bench/sim/simulator.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "bench/sim/trace_generators.h"
#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"
#include "tests/baselines_registered.h"

namespace superserve {
namespace {

ModelProfile Profile() { return testing::ThreeSubnetProfile(); }

std::unique_ptr<Policy> Make(const std::string& name, const ModelProfile& p) {
  PolicyConfig c;
  c.fixed_subnet_id = 102;
  c.baselines.slackfit_buckets = 4;
  auto policy = MakePolicy(name, p, c);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return *std::move(policy);
}

TEST(SimulatorTest, SingleQueryRunsAtBatchOneOnTheMostAccurateSubnet) {
  ModelProfile p = Profile();
  auto policy = Make("slackfit", p);
  SimulatorOptions o;
  o.workers = 1;
  o.slo = Millis(20);
  o.dispatch_overhead = Micros(500);
  std::vector<Nanos> arrivals = {Millis(1)};
  auto r = Simulate(p, arrivals, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 1);
  EXPECT_EQ(r->batches, 1);
  EXPECT_DOUBLE_EQ(r->mean_accuracy(), 80);  // 4 ms + 0.5 ms fits 20 ms
  EXPECT_EQ(r->p99_latency, Millis(4.5));
}

TEST(SimulatorTest, OverheadSamplesReplaceTheConstantAndReachTheTail) {
  ModelProfile p = Profile();
  SimulatorOptions o;
  o.workers = 1;
  o.slo = Millis(20);
  o.dispatch_overhead = Micros(500);
  // Lone queries far apart: each runs alone at batch 1 (4 ms) plus the
  // overhead its batch drew.
  std::vector<Nanos> arrivals;
  for (int i = 0; i < 400; ++i) arrivals.push_back(Millis(50) * i);
  auto constant = Make("slackfit", p);
  auto base = Simulate(p, arrivals, constant.get(), o);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ(base->p99_latency, Millis(4.5));

  // One sample in ten is 10 ms: about 40 queries take 14 ms, the rest 5 ms;
  // the 14 ms ones still meet the 20-ms SLO.
  o.dispatch_overhead_samples = {Millis(1), Millis(1), Millis(1), Millis(1), Millis(1),
                                 Millis(1), Millis(1), Millis(1), Millis(1), Millis(10)};
  auto drawn = Make("slackfit", p);
  auto r = Simulate(p, arrivals, drawn.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 400);
  EXPECT_EQ(r->p99_latency, Millis(14));
  // Half the draws 17 ms: on the most accurate subnet (4 ms) those queries
  // would miss the 20-ms SLO. The same seed draws the same ones.
  o.dispatch_overhead_samples = {Millis(1), Millis(17)};
  auto tail = Make("slackfit", p);
  auto r3 = Simulate(p, arrivals, tail.get(), o);
  ASSERT_TRUE(r3.ok());
  // The policy sees the tail in its telemetry: after the first few late
  // queries it serves the fastest subnet (1 + 17 ms fits), where the
  // constant overhead let it serve the most accurate one.
  EXPECT_DOUBLE_EQ(base->mean_accuracy(), 80);
  EXPECT_LT(r3->mean_accuracy(), 72);
  EXPECT_GT(r3->late, 0);
  EXPECT_LT(r3->late, 40);
  EXPECT_EQ(r3->met + r3->late + r3->dropped, 400);
  auto again = Make("slackfit", p);
  auto r4 = Simulate(p, arrivals, again.get(), o);
  ASSERT_TRUE(r4.ok());
  EXPECT_EQ(r4->late, r3->late);
}

TEST(SimulatorTest, EveryQueryEndsExactlyOnceForEveryPolicy) {
  ModelProfile p = Profile();
  // Bursty overload for 3 workers, with two failures on the way.
  auto arrivals = BurstyArrivals(500, 2500, 8, Seconds(5), 3);
  for (const std::string& name : PolicyNames()) {
    auto policy = Make(name, p);
    SimulatorOptions o;
    o.workers = 3;
    o.slo = Millis(20);
    o.noise_cv = 0.1;
    o.worker_failures = {Seconds(1), Seconds(3)};
    auto r = Simulate(p, arrivals, policy.get(), o);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_EQ(r->queries, static_cast<int64_t>(arrivals.size())) << name;
    EXPECT_EQ(r->met + r->late + r->dropped, r->queries) << name;
    int64_t met = 0, late = 0, dropped = 0, arrived = 0;
    for (const auto& b : r->timeline) {
      met += b.met;
      late += b.late;
      dropped += b.dropped;
      arrived += b.arrivals;
    }
    EXPECT_EQ(met, r->met) << name;
    EXPECT_EQ(late, r->late) << name;
    EXPECT_EQ(dropped, r->dropped) << name;
    EXPECT_EQ(arrived, r->queries) << name;
    EXPECT_GT(r->met, 0) << name;
    EXPECT_EQ(r->timeline.back().live_workers, 1) << name;
  }
}

TEST(SimulatorTest, AllWorkersFailingDropsWhatIsLeft) {
  ModelProfile p = Profile();
  auto policy = Make("infaas", p);
  SimulatorOptions o;
  o.workers = 2;
  o.worker_failures = {Seconds(1), Seconds(1)};
  auto arrivals = PoissonArrivals(1000, Seconds(2), 5);
  auto r = Simulate(p, arrivals, policy.get(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->met + r->late + r->dropped, r->queries);
  EXPECT_GT(r->dropped, r->queries / 3);  // the second half had no workers
  EXPECT_LT(r->met, r->queries * 2 / 3);
}

TEST(SimulatorTest, SloBelowFastestTupleDropsEverything) {
  ModelProfile p = Profile();
  auto policy = Make("slackfit", p);
  SimulatorOptions o;
  o.slo = Micros(1200);  // < 0.5 ms overhead + 1 ms fastest tuple
  auto arrivals = PoissonArrivals(100, Seconds(1), 2);
  auto r = Simulate(p, arrivals, policy.get(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dropped, r->queries);
  EXPECT_EQ(r->met, 0);
}

TEST(SimulatorTest, DeterministicForASeedAndNoiseDependsOnIt) {
  ModelProfile p = Profile();
  auto arrivals = BurstyArrivals(500, 1500, 4, Seconds(3), 8);
  SimulatorOptions o;
  o.workers = 2;
  o.slo = Millis(15);
  o.noise_cv = 0.3;
  auto run = [&](uint64_t seed) {
    auto policy = Make("slackfit", p);
    o.seed = seed;
    return *Simulate(p, arrivals, policy.get(), o);
  };
  SimulationResult a = run(1), b = run(1), c = run(2);
  EXPECT_EQ(a.met, b.met);
  EXPECT_EQ(a.late, b.late);
  EXPECT_DOUBLE_EQ(a.accuracy_sum, b.accuracy_sum);
  EXPECT_NE(a.accuracy_sum, c.accuracy_sum);
}

// A dynamic model: two applications, short (~2 ms) and long (~8 ms); a batch
// of k takes 1 ms + 0.5 * k * max(l).
ModelProfile DynamicProfile() {
  ModelProfile p;
  p.model = "dyn";
  p.batch_sizes = {1, 2, 4, 8};
  p.is_dynamic = true;
  p.dynamic.batch_overhead_us = 1000;
  p.dynamic.per_request_factor = 0.5;
  p.dynamic.applications.push_back({"short", {1800, 2200}, {1}});
  p.dynamic.applications.push_back({"long", {7800, 8200}, {1}});
  return p;
}

TEST(SimulatorTest, DynamicModelBatchesRunForTheirLongestMember) {
  ModelProfile p = DynamicProfile();
  // Replayed times: a lone short query, then a short and a long together.
  SimulatorOptions o;
  o.workers = 1;
  o.slo = Millis(100);
  o.dispatch_overhead = 0;
  o.applications = {0, 0, 1};
  o.exec_us = {2000, 2000, 8000};
  std::vector<Nanos> arrivals = {0, Millis(50), Millis(50)};
  for (const char* name : {"orloj", "clockwork", "clockwork-windows", "nexus"}) {
    auto policy = Make(name, p);
    auto r = Simulate(p, arrivals, policy.get(), o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->met, 3) << name;
    // 1 + 0.5 * 1 * 2 = 2 ms alone; together 1 + 0.5 * 2 * 8 = 9 ms, or
    // 2 ms and 5 ms one after the other (7 ms for the second).
    EXPECT_GE(r->p99_latency, Millis(2)) << name;
    EXPECT_LE(r->p99_latency, Millis(9)) << name;
  }
}

TEST(SimulatorTest, DynamicModelEveryQueryEndsOnceAndSeedsRepeat) {
  ModelProfile p = DynamicProfile();
  std::vector<Nanos> arrivals;
  SimulatorOptions o;
  o.workers = 2;
  o.slo = Millis(25);
  std::mt19937_64 rng(4);
  Nanos t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += static_cast<Nanos>(std::exponential_distribution<double>(1.0 / 3e6)(rng));
    arrivals.push_back(t);
    o.applications.push_back(i % 3 == 0 ? 1 : 0);
  }
  for (const char* name : {"orloj", "clockwork", "clockwork-windows", "nexus"}) {
    auto policy = Make(name, p);
    auto r = Simulate(p, arrivals, policy.get(), o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->met + r->late + r->dropped, r->queries) << name;
    EXPECT_GT(r->slo_attainment(), 0.5) << name;
    auto again = Make(name, p);
    auto r2 = Simulate(p, arrivals, again.get(), o);
    ASSERT_TRUE(r2.ok());
    EXPECT_EQ(r2->met, r->met) << name << ": same seed, same run";
  }
  SimulatorOptions bad = o;
  bad.applications.pop_back();
  auto policy = Make("orloj", p);
  EXPECT_FALSE(Simulate(p, arrivals, policy.get(), bad).ok());
  bad = o;
  bad.applications[0] = 2;
  EXPECT_FALSE(Simulate(p, arrivals, policy.get(), bad).ok());
  bad = o;
  bad.exec_us.assign(arrivals.size(), -1);
  EXPECT_FALSE(Simulate(p, arrivals, policy.get(), bad).ok());
}

// Load-adaptive exits: one application, 1.0-1.2 ms at threshold 0.6 (80 %),
// 4.0-4.4 ms at 0.9 (90 %, the default); a batch of one takes its query's
// time at the threshold it runs at.
ModelProfile ThresholdsProfile() {
  ModelProfile p;
  p.model = "exits";
  p.batch_sizes = {1};
  p.is_dynamic = true;
  p.dynamic.per_request_factor = 1;
  p.dynamic.default_threshold = 0.9;
  p.dynamic.applications.push_back({"a", {4000, 4400}, {1}, {}, 90.0});
  p.dynamic.thresholds.push_back({0.6, 80, {{"a", {1000, 1200}, {1}, {}, 80.0}}});
  p.dynamic.thresholds.push_back({0.9, 90, p.dynamic.applications});
  return p;
}

TEST(SimulatorTest, OrlojLowersTheExitThresholdOnlyWhenTheDeadlineNeedsIt) {
  std::vector<Nanos> arrivals;
  for (int i = 0; i < 50; ++i) arrivals.push_back(Millis(100) * i);  // light load
  SimulatorOptions o;
  o.workers = 1;
  o.dispatch_overhead = 0;
  o.applications.assign(arrivals.size(), 0);
  ModelProfile p = ThresholdsProfile();
  // 10 ms: the default threshold makes it; every query runs there.
  o.slo = Millis(10);
  auto policy = Make("orloj", p);
  auto r = Simulate(p, arrivals, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 50);
  EXPECT_DOUBLE_EQ(r->mean_accuracy(), 90);
  EXPECT_EQ(r->threshold_queries, (std::map<double, int64_t>{{0.9, 50}}));
  EXPECT_GE(r->p99_latency, Millis(4));
  // 3 ms (2.5 after the policy's 0.5-ms overhead estimate): only 0.6 makes
  // it, and the simulated batch takes 0.6's time.
  o.slo = Millis(3);
  policy = Make("orloj", p);
  r = Simulate(p, arrivals, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 50);
  EXPECT_DOUBLE_EQ(r->mean_accuracy(), 80);
  EXPECT_EQ(r->threshold_queries, (std::map<double, int64_t>{{0.6, 50}}));
  EXPECT_LE(r->p99_latency, Micros(1200));
  // The same profile without per-threshold data: the default only.
  ModelProfile fixed = p;
  fixed.dynamic.thresholds.clear();
  policy = Make("orloj", fixed);
  r = Simulate(fixed, arrivals, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 0);
}

// An execution time beyond the int64 nanoseconds (a day's replayed time
// scaled a million times) used to wrap to 1 ns: the query met its deadline.
TEST(SimulatorTest, AnExecutionTooLongToCountIsLateNotWrapped) {
  ModelProfile p = DynamicProfile();
  SimulatorOptions o;
  o.workers = 1;
  o.slo = Millis(100);
  o.applications = {0};
  o.exec_us = {8.64e10};
  o.exec_scale = 1e6;
  auto policy = Make("clockwork", p);
  auto r = Simulate(p, {0}, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 0);
  EXPECT_EQ(r->late + r->dropped, 1);
}

TEST(SimulatorTest, RejectsBadOptions) {
  ModelProfile p = Profile();
  auto policy = Make("slackfit", p);
  SimulatorOptions o;
  o.workers = 0;
  EXPECT_FALSE(Simulate(p, {}, policy.get(), o).ok());
  // Each out-of-range option is an error that names it and its range (an
  // SLO beyond the int64 nanoseconds used to read as "must be > 0", and a
  // NaN noise or an infinite scale ran).
  const struct {
    std::function<void(SimulatorOptions&)> set;
    std::string want;
  } bad[] = {
      {[](SimulatorOptions& o) { o.slo = 0; }, "--slo-ms must be in (0, 8.64e+07] ms"},
      {[](SimulatorOptions& o) { o.slo = kMaxQueryTimeout + 1; }, "--slo-ms must be in"},
      {[](SimulatorOptions& o) { o.exec_scale = std::numeric_limits<double>::infinity(); },
       "--exec_scale must be finite and > 0; got inf"},
      {[](SimulatorOptions& o) { o.exec_scale = 0; }, "--exec_scale"},
      {[](SimulatorOptions& o) { o.noise_cv = std::nan(""); },
       "--noise_cv must be finite and >= 0; got nan"},
      {[](SimulatorOptions& o) { o.noise_cv = -1; }, "--noise_cv"},
      {[](SimulatorOptions& o) { o.dispatch_overhead = -1; },
       "--dispatch_overhead_us must be in [0, 8.64e+10] us"},
      {[](SimulatorOptions& o) { o.timeline_bin = 0; }, "timeline bin must be > 0 ns; got 0"},
  };
  for (const auto& c : bad) {
    SimulatorOptions o;
    c.set(o);
    auto r = Simulate(p, {Millis(1)}, policy.get(), o);
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(c.want), std::string::npos)
        << r.status() << " (want " << c.want << ")";
  }
}

// The timeline's bins cover the simulated span, empty ones included: kept
// only when asked for (two queries 1e14 us apart took 9.4 GB without
// --timeline), and bounded when asked for (1-ns bins: bad_alloc after a
// minute).
TEST(SimulatorTest, TimelineOnlyWhenAskedAndBounded) {
  ModelProfile p = Profile();
  const std::vector<Nanos> far_apart = {0, Micros(1e14)};
  SimulatorOptions o;
  o.workers = 1;
  o.timeline = false;
  auto policy = Make("slackfit", p);
  auto r = Simulate(p, far_apart, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 2);
  EXPECT_TRUE(r->timeline.empty());

  o.timeline = true;
  r = Simulate(p, far_apart, policy.get(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("need more than 1000000 bins of 1 s"),
            std::string::npos)
      << r.status();
  // Within the trace's span but not the answers': the last query ends 4.5
  // ms after it arrives, beyond the last of a million 1-ns bins.
  o.timeline_bin = 1;
  r = Simulate(p, {Micros(999)}, policy.get(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("use wider bins"), std::string::npos)
      << r.status();
  // Within the bound: one bin per second, the last one holding the answer.
  o.timeline_bin = Seconds(1);
  r = Simulate(p, {0, Seconds(5)}, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->timeline.size(), 6u);
  EXPECT_EQ(r->timeline[5].met, 1);
}

// Idle time costs nothing: a lone query that symphony holds until its
// latest start, with a day's SLO, used to take the core's 10-ms tick 8.6
// million times (an SLO of 1e10 ms: 52 s). Ticks with nothing due are
// skipped; the sweeps, wake-ups and decisions stay at their times.
TEST(SimulatorTest, IdleTimeCostsNoTicks) {
  ModelProfile p = Profile();
  SimulatorOptions o;
  o.workers = 1;
  o.slo = kMaxQueryTimeout;
  auto policy = Make("symphony", p);
  auto r = Simulate(p, {Millis(1)}, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 1);
  EXPECT_GE(r->ticks, 1);
  EXPECT_LT(r->ticks, 10);
  EXPECT_GT(r->p99_latency, kMaxQueryTimeout / 2) << "held for most of its SLO";
  // A query whose deadline (21 ms) passes while it waits behind a long
  // batch is swept by the first of the core's 10-ms ticks after it (30 ms),
  // as without skipping.
  struct Drops : ServingObserver {
    void OnQueryDone(const QueryDone& d) override {
      if (d.outcome == QueryOutcome::kDeadlineExceeded) at.push_back(d.now);
    }
    std::vector<Nanos> at;
  } drops;
  o.slo = Millis(20);
  o.exec_time = [](int32_t, int32_t) { return Millis(100); };
  o.trace = &drops;
  policy = Make("slackfit", p);
  r = Simulate(p, {0, Millis(1)}, policy.get(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->late, 1);
  EXPECT_EQ(r->dropped, 1);
  EXPECT_EQ(drops.at, std::vector<Nanos>{Millis(30)});
}

}  // namespace
}  // namespace superserve

namespace superserve {
namespace {

// Placement: emulated workers load a model for its profile's load time, one
// load at a time, and the core evicts to make room (issue 43).
TEST(SimulatorPlacementTest, LoadsTakeTheProfilesTimeOneAtATimeAndEvictToMakeRoom) {
  ModelProfile a = Profile(), b = Profile();
  a.model = "a";
  b.model = "b";
  for (ModelProfile* p : {&a, &b}) {
    p->memory_bytes = 60;
    p->load_time = Millis(10);
  }
  auto pa = Make("fixed-subnet", a), pb = Make("fixed-subnet", b);
  const std::vector<SimulatedModel> models = {{&a, pa.get(), 0}, {&b, pb.get(), 0}};
  SimulatorOptions o;
  o.workers = 1;
  o.slo = Millis(50);
  o.worker_memory_bytes = 100;  // one model at a time
  // a, then b (evicts a), then a again (evicts b): three loads of 10 ms.
  const std::vector<Nanos> arrivals = {Millis(1), Millis(100), Millis(200)};
  const std::vector<int32_t> model_of = {0, 1, 0};
  auto r = SimulateModels(models, arrivals, model_of, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->met, 3);
  EXPECT_EQ(r->loads, 3);
  EXPECT_EQ(r->unloads, 2);
  EXPECT_EQ(r->cold_starts, (std::vector<Nanos>{Millis(10), Millis(10), Millis(10)}));
  // Room for both, arriving together: the second load waits for the first.
  o.worker_memory_bytes = 120;
  auto both = SimulateModels(models, std::vector<Nanos>{Millis(1), Millis(1)},
                             std::vector<int32_t>{0, 1}, o);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->met, 2);
  EXPECT_EQ(both->unloads, 0);
  EXPECT_EQ(both->cold_starts, (std::vector<Nanos>{Millis(10), Millis(20)}));
  // A load that cannot finish in time: the query is answered at once.
  o.slo = Millis(5);
  auto late = SimulateModels(models, std::vector<Nanos>{Millis(1)}, std::vector<int32_t>{0}, o);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->met, 0);
  EXPECT_EQ(late->dropped, 1);
  EXPECT_EQ(late->load_too_late, 1);
}

}  // namespace
}  // namespace superserve
