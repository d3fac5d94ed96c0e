// The planner against exhaustive search on small random modules (Harpagon
// §IV-B: its planner reaches the brute-force optimum on 91.5 % of workloads).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "gtest/gtest.h"
#include "planner/module_planner.h"
#include "tests/planner/brute_force_planner.h"
#include "tests/planner/planner_test_util.h"

namespace superserve {
namespace {

using testing::BruteForceModuleCost;

// A module with 2-4 batch sizes from {1, ..., 32} and d(b) = (a + c b) x noise,
// non-decreasing in b; a rate in [5, 150] req/s; a budget between 1.5x the
// fastest batch's duration and 2.5x the slowest one's.
struct Instance {
  Module module;
  double rate;
  double budget;
};

Instance RandomInstance(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  const std::vector<int> all = {1, 2, 4, 8, 16, 32};
  const int k = 2 + static_cast<int>(rng() % 3);
  std::vector<int> batches;
  while (static_cast<int>(batches.size()) < k) {
    const int b = all[rng() % all.size()];
    if (std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
  }
  std::sort(batches.begin(), batches.end());
  const double a = 0.02 + 0.28 * u(rng);
  const double c = 0.002 + 0.048 * u(rng);
  Instance in;
  double previous = 0;
  for (int b : batches) {
    const double d = std::max(previous, (a + c * b) * (0.9 + 0.2 * u(rng)));
    in.module.configs.push_back({b, d});
    previous = d;
  }
  in.module.name = "random";
  in.rate = 5 + 145 * u(rng);
  const double lo = 1.5 * in.module.configs.front().duration_s;
  const double hi = 2.5 * in.module.configs.back().duration_s;
  in.budget = lo + (hi - lo) * u(rng);
  return in;
}

TEST(BruteForceTest, PlannerNeverBeatsBruteForceAndOftenMatchesIt) {
  std::mt19937_64 rng(20241123);
  constexpr int kInstances = 1000;
  int feasible = 0, optimal = 0, s3_optimal = 0, s4_optimal = 0, infeasible_both = 0;
  double excess_sum = 0, excess_max = 0;
  double planner_s = 0, brute_s = 0;
  for (int i = 0; i < kInstances; ++i) {
    const Instance in = RandomInstance(rng);
    auto t0 = std::chrono::steady_clock::now();
    auto plan = PlanModule(in.module, in.rate, in.budget, PlanMethod::kHarpagon);
    auto t1 = std::chrono::steady_clock::now();
    const double best = BruteForceModuleCost(in.module, in.rate, in.budget);
    auto t2 = std::chrono::steady_clock::now();
    planner_s += std::chrono::duration<double>(t1 - t0).count();
    brute_s += std::chrono::duration<double>(t2 - t1).count();
    if (!plan.ok()) {
      // The planner may miss a plan brute force finds (then it is not
      // optimal), never the other way round.
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
      if (std::isinf(best)) {
        ++infeasible_both;
      } else {
        ++feasible;
      }
      continue;
    }
    ASSERT_FALSE(std::isinf(best))
        << "instance " << i << ": the planner's plan is outside the search";
    ++feasible;
    // The plan meets its budget (recomputed here) and is in TC dispatch order.
    ModulePlan check = *plan;
    AnnotateWorstLatency(Dispatch::kBatchAware, &check);
    EXPECT_TRUE(WithinBudget(check.worst_latency_s, in.budget)) << "instance " << i;
    for (size_t g = 1; g < check.groups.size(); ++g) {
      EXPECT_GE(check.groups[g - 1].config.throughput(), check.groups[g].config.throughput());
    }
    // A planner cheaper than exhaustive search would be a bug in one of them.
    EXPECT_GE(plan->cost, best - 1e-9 * std::max(1.0, best)) << "instance " << i;
    const double excess = plan->cost / best - 1;
    if (excess <= 1e-6) ++optimal;
    excess_sum += std::max(0.0, excess);
    excess_max = std::max(excess_max, excess);
    auto s3 = PlanModule(in.module, in.rate, in.budget, PlanMethod::kS3);
    if (s3.ok() && s3->cost / best - 1 <= 1e-6) ++s3_optimal;
    auto s4 = PlanModule(in.module, in.rate, in.budget, PlanMethod::kS4);
    if (s4.ok() && s4->cost / best - 1 <= 1e-6) ++s4_optimal;
  }
  const double fraction = static_cast<double>(optimal) / feasible;
  std::printf(
      "brute force: %d instances, %d feasible (%d infeasible for both); planner optimal on %d "
      "(%.1f %%), s4 on %d (%.1f %%), s3 on %d (%.1f %%); mean excess %.2f %%, max %.1f %%; "
      "planner %.1f us / instance, brute force %.2f ms / instance\n",
      kInstances, feasible, infeasible_both, optimal, 100 * fraction, s4_optimal,
      100.0 * s4_optimal / feasible, s3_optimal, 100.0 * s3_optimal / feasible,
      100 * excess_sum / feasible, 100 * excess_max, 1e6 * planner_s / kInstances,
      1e3 * brute_s / kInstances);
  ASSERT_GT(feasible, kInstances / 2);
  // Measured on this generator and seed: 943 of 1000 (94.3 %; the paper: 91.5 %
  // of its workloads). See docs/planning.md.
  EXPECT_GE(fraction, 0.94);
}

}  // namespace
}  // namespace superserve
