// Symphony's analytic bounds (Table 2) and its policy on the simulator with
// many models: load proportionality, per-model accounting, goodput near the
// staggered bound and no collapse past the peak.
#include "bench/sim/symphony_cases.h"

#include <memory>
#include <numeric>
#include <vector>

#include "bench/baselines/greedy_policies.h"
#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "policies/ratefit_policy.h"
#include "policies/symphony_policy.h"
#include "tests/policies/policy_test_util.h"
#include "tests/baselines_registered.h"

namespace superserve {
namespace {

TEST(SymphonyCasesTest, AnalyticBoundsAreTable2s) {
  // Symphony Table 2, 8 GPUs: ResNet50 (1.053, 5.072, 25 ms) and
  // InceptionV3 (5.090, 18.368, 70 ms).
  AnalyticBound st = StaggeredBound(1.053, 5.072, 25, 8);
  AnalyticBound nc = UncoordinatedBound(1.053, 5.072, 25, 8);
  EXPECT_EQ(st.batch, 16);
  EXPECT_NEAR(st.throughput, 5839, 1);
  EXPECT_EQ(nc.batch, 7);
  EXPECT_NEAR(nc.throughput, 4501, 1);
  st = StaggeredBound(5.090, 18.368, 70, 8);
  nc = UncoordinatedBound(5.090, 18.368, 70, 8);
  EXPECT_EQ(st.batch, 8);
  EXPECT_NEAR(st.throughput, 1083, 1);
  EXPECT_EQ(nc.batch, 3);
  EXPECT_NEAR(nc.throughput, 713, 1);
}

TEST(SymphonyCasesTest, LinearProfileHasEveryBatchOrPowersOfTwo) {
  ModelProfile p = LinearProfile("r", 1.053, 5.072, 32);
  ASSERT_EQ(p.batch_sizes.size(), 32u);
  EXPECT_EQ(p.subnets[0].latency[15], Millis(1.053 * 16 + 5.072));
  ModelProfile q = LinearProfile("r", 1, 5, 32, true);
  EXPECT_EQ(q.batch_sizes, (std::vector<int32_t>{1, 2, 4, 8, 16, 32}));
}

Workload ResNet(int32_t models, int32_t workers) {
  Workload w;
  w.profile = LinearProfile("resnet50", 1.053, 5.072, 64);
  w.models = models;
  w.slo = Millis(25);
  w.duration = Seconds(2);
  w.sim.workers = workers;
  return w;
}

PolicyBuilder Symphony() {
  return [](const ModelProfile& p) { return std::make_unique<SymphonyPolicy>(p); };
}
PolicyBuilder MaxBatch() {
  return [](const ModelProfile& p) { return std::make_unique<MaxBatchPolicy>(p); };
}

TEST(SymphonyCasesTest, ManyModelsAtLowLoadKeepMostWorkersIdle) {
  // 4 models on 8 workers at ~10 % of the staggered peak (584 q/s): the
  // ideal idle fraction is ~0.9. Symphony defers and takes the lowest free
  // id, so the high ids never run; eager MaxBatch spreads single queries
  // over every worker.
  Workload w = ResNet(4, 8);
  w.zipf_s = 0.9;
  auto s = RunWorkload(w, 584, Symphony());
  auto e = RunWorkload(w, 584, MaxBatch());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_GE(s->slo_attainment(), 0.999);
  EXPECT_GE(e->slo_attainment(), 0.999);
  ASSERT_EQ(s->model_queries.size(), 4u);
  EXPECT_EQ(std::accumulate(s->model_queries.begin(), s->model_queries.end(), int64_t{0}),
            s->queries);
  EXPECT_EQ(std::accumulate(s->model_met.begin(), s->model_met.end(), int64_t{0}), s->met);
  EXPECT_GT(s->model_queries[0], s->model_queries[3]) << "Zipf: model 0 is the most popular";
  EXPECT_LE(s->workers_used(), 4);
  EXPECT_GE(s->idle_fraction(), 0.8);
  EXPECT_GT(s->idle_fraction(), e->idle_fraction() + 0.2);
  EXPECT_GT(s->mean_batch(), 2 * e->mean_batch()) << "deferred batches are larger";
}

// A target that no rate meets (a 1-us SLO) ends the search at goodput 0 after
// a bounded number of runs; the bisection once halved its upper end ~1100
// times, down to a rate of 0, and failed with "rate must be > 0".
TEST(SymphonyCasesTest, GoodputSearchEndsWhenNoRateMeetsTheTarget) {
  Workload w = ResNet(1, 2);
  w.slo = Micros(1);
  w.duration = Seconds(1);
  int runs = 0;
  PolicyBuilder counted = [&runs](const ModelProfile& p) -> std::unique_ptr<Policy> {
    ++runs;
    return std::make_unique<MaxBatchPolicy>(p);
  };
  auto g = Goodput(w, counted, 1000);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, 0);
  EXPECT_LE(runs, 8 + kMaxGoodputSteps);
  EXPECT_EQ(Goodput(w, counted, NAN).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Goodput(w, counted, INFINITY).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SymphonyCasesTest, ResNet50GoodputNearTheStaggeredBoundWithoutCollapse) {
  Workload w = ResNet(1, 8);
  const double bound = StaggeredBound(1.053, 5.072, 25, 8).throughput;
  SimulationResult at;
  auto g = Goodput(w, Symphony(), bound, 0.99, &at);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_GE(*g, 0.85 * bound) << "the issue's target: within 15 % of 5,839 q/s";
  EXPECT_GE(at.slo_attainment(), 0.99);
  // Past the peak, the sliding window keeps batches large: attainment at
  // 1.1x stays >= 0.9 of the peak's.
  auto over = RunWorkload(w, 1.1 * *g, Symphony());
  ASSERT_TRUE(over.ok());
  EXPECT_GE(over->slo_attainment(), 0.9 * at.slo_attainment());
}

// Issue 19, item 6: one subnet whose latency is nearly flat in batch size
// (l(b) = 8 + 0.15 b ms, batches 1-32), 4 workers, SLO 18.1 ms, Poisson
// 4,000 q/s. Eager workers fall into step and a query that arrives after
// them waits a whole batch: eager ratefit dropped 5 % (0.946 over 10 s).
// Paced (the default) the workers take turns and every query is served in
// time, in larger batches.
TEST(SymphonyCasesTest, TheDefaultPacesItsWorkersOnAFlatSingleSubnetProfile) {
  Workload w;
  w.profile = testing::HandProfile({1, 2, 4, 8, 16, 32}, {70},
                                   {{8.15, 8.3, 8.6, 9.2, 10.4, 12.8}});
  w.slo = Millis(18.1);
  w.duration = Seconds(4);
  w.sim.workers = 4;
  w.sim.noise_cv = 0.03;
  auto ratefit = [](double pace) -> PolicyBuilder {
    return [pace](const ModelProfile& p) {
      RateFitOptions o;
      o.pace = pace;
      return std::make_unique<RateFitPolicy>(p, o);
    };
  };
  auto paced = RunWorkload(w, 4000, ratefit(RateFitOptions().pace));
  auto eager = RunWorkload(w, 4000, ratefit(0));
  ASSERT_TRUE(paced.ok()) << paced.status();
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_GE(paced->slo_attainment(), 0.999);
  EXPECT_LT(eager->slo_attainment(), 0.98);
  EXPECT_GT(paced->mean_batch(), eager->mean_batch());
}

}  // namespace
}  // namespace superserve
