// Overload without collapse, for every policy (issue 20): past the peak the
// serving core sheds what cannot be served in time (admission and head
// shedding, serving/model_scheduler.h), so that goodput stays near the best
// the policy reaches at or below the peak. Simulated clock, fixed seeds.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/sim/simulator.h"
#include "bench/sim/trace_generators.h"
#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"
#include "tests/baselines_registered.h"

namespace superserve {
namespace {

struct Case {
  std::string name;
  ModelProfile profile;
  int32_t workers;
  double slo_factor;  // SLO = this x the fastest subnet's largest-batch latency
};

// Fastest subnet x the largest batch: the peak rate per worker.
double PeakQps(const ModelProfile& p, int32_t workers) {
  double best = 0;
  for (const auto& s : p.subnets) {
    for (size_t b = 0; b < p.batch_sizes.size(); ++b) {
      best = std::max(best, p.batch_sizes[b] / ToSeconds(s.latency[b]));
    }
  }
  return best * workers;
}

Nanos FastestLargestBatch(const ModelProfile& p) {
  Nanos best = INT64_MAX;
  for (const auto& s : p.subnets) best = std::min(best, s.latency.back());
  return best;
}

std::vector<Case> Cases() {
  using testing::HandProfile;
  std::vector<Case> cases;
  // The issue's live setup: 2.8 / 3.8 / 5.5 / 9.2 / 16.5 ms at batch 1..16
  // for the fastest subnet, three slower, more accurate ones.
  std::vector<std::vector<double>> issue;
  for (double f : {1.0, 1.3, 1.7, 2.3}) {
    issue.push_back({2.8 * f, 3.8 * f, 5.5 * f, 9.2 * f, 16.5 * f});
  }
  cases.push_back({"issue-shaped", HandProfile({1, 2, 4, 8, 16}, {76, 78, 80, 82}, issue), 4, 6});
  // GPU-shaped: a large fixed cost growing with accuracy, a small per-query
  // cost.
  std::vector<std::vector<double>> gpu;
  const double fixed[] = {5, 7, 9, 12}, per[] = {0.3, 0.45, 0.6, 0.8};
  for (int s = 0; s < 4; ++s) {
    gpu.push_back({});
    for (int b : {1, 2, 4, 8, 16, 32}) gpu.back().push_back(fixed[s] + per[s] * b);
  }
  cases.push_back({"gpu-shaped", HandProfile({1, 2, 4, 8, 16, 32}, {70, 74, 77, 79}, gpu), 2, 3});
  // CPU-shaped: flat in batch up to 4, then linear.
  cases.push_back({"cpu-shaped",
                   HandProfile({1, 2, 4, 8, 16}, {88, 90, 91},
                               {{3, 3, 3.2, 6, 12}, {4, 4.1, 4.5, 8.5, 17}, {6, 6.2, 7, 13, 26}}),
                   4, 4});
  return cases;
}

struct Curve {
  double best_at_or_below_peak = 0;  // goodput, q/s
  double at_125 = 0, at_200 = 0;
  double worst_ratio() const {
    return best_at_or_below_peak > 0
               ? std::min(at_125, at_200) / best_at_or_below_peak
               : 0;
  }
};

Curve Measure(const Case& c, const std::string& policy_name, bool shed) {
  const double peak = PeakQps(c.profile, c.workers);
  // 2 s: with 1 s, the start (no loss yet, so no shedding; see
  // serving/model_scheduler.h) weighs too much.
  const Nanos duration = Seconds(2);
  Curve curve;
  for (double x : {0.5, 1.0, 1.25, 2.0}) {
    auto policy = MakePolicy(policy_name, c.profile, PolicyConfig());
    EXPECT_TRUE(policy.ok()) << policy.status();
    if (!policy.ok()) return curve;
    SimulatorOptions o;
    o.workers = c.workers;
    o.slo = static_cast<Nanos>(c.slo_factor * static_cast<double>(FastestLargestBatch(c.profile)));
    o.noise_cv = 0.05;
    o.serving.overload.shed = shed;
    std::vector<Nanos> arrivals = PoissonArrivals(x * peak, duration, 11);
    auto r = Simulate(c.profile, arrivals, policy->get(), o);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return curve;
    EXPECT_EQ(r->met + r->late + r->dropped, r->queries);
    const double goodput = static_cast<double>(r->met) / ToSeconds(duration);
    if (x <= 1.0) curve.best_at_or_below_peak = std::max(curve.best_at_or_below_peak, goodput);
    if (x == 1.25) curve.at_125 = goodput;
    if (x == 2.0) curve.at_200 = goodput;
  }
  return curve;
}

// One test per policy (PolicyNames()), so that each one's result is its own.
class OverloadByPolicy : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(EveryPolicy, OverloadByPolicy, ::testing::ValuesIn(PolicyNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST_P(OverloadByPolicy, GoodputPastThePeakStaysNearTheBest) {
  const std::string& name = GetParam();
  for (const Case& c : Cases()) {
    const Curve k = Measure(c, name, /*shed=*/true);
    std::printf("%-13s %-12s best<=peak %7.0f q/s  1.25x %7.0f  2x %7.0f  worst ratio %.3f\n",
                c.name.c_str(), name.c_str(), k.best_at_or_below_peak, k.at_125, k.at_200,
                k.worst_ratio());
    EXPECT_GE(k.worst_ratio(), 0.9) << c.name << " " << name;
  }
}

// Where a policy keeps up, shedding costs nothing: bursty traces at a mean
// of 0.3x and 0.6x the peak (a deterministic base plus a gamma stream with
// CV² 8) that a policy serves with attainment >= 0.99 without shedding end
// with the same attainment, within 0.001, with it. (Where it does not keep
// up, e.g. MaxAcc at 0.6x on the CPU shape, 0.83 -> 0.78: bursts of
// overload, not sustained, are where the shedding's plan is least exact.)
TEST(OverloadTest, BurstsBelowThePeakLoseNothingToShedding) {
  double worst = 1;
  int checked = 0;
  for (const Case& c : Cases()) {
    const double peak = PeakQps(c.profile, c.workers);
    for (double x : {0.3, 0.6}) {
      const std::vector<Nanos> arrivals =
          BurstyArrivals(0.5 * x * peak, 0.5 * x * peak, 8, Seconds(2), 5);
      for (const std::string& name : PolicyNames()) {
        double attainment[2] = {0, 0};
        for (int shed = 0; shed < 2; ++shed) {
          auto policy = MakePolicy(name, c.profile, PolicyConfig());
          ASSERT_TRUE(policy.ok());
          SimulatorOptions o;
          o.workers = c.workers;
          o.slo = static_cast<Nanos>(c.slo_factor *
                                     static_cast<double>(FastestLargestBatch(c.profile)));
          o.noise_cv = 0.05;
          o.serving.overload.shed = shed == 1;
          auto r = Simulate(c.profile, arrivals, policy->get(), o);
          ASSERT_TRUE(r.ok());
          attainment[shed] = r->slo_attainment();
        }
        if (attainment[0] < 0.99) continue;
        EXPECT_GE(attainment[1], attainment[0] - 0.001) << c.name << " " << name << " " << x;
        worst = std::min(worst, attainment[1] - attainment[0]);
        ++checked;
      }
    }
  }
  std::printf("worst attainment change from shedding, %d cases that keep up: %+.4f\n", checked,
              worst);
  EXPECT_GE(checked, 20);
}

// The property is the shedding's: without it, EDF's spiral takes goodput
// far below the peak (the issue measured 0.36 live).
TEST(OverloadTest, WithoutSheddingGoodputCollapses) {
  const Case c = Cases().front();
  const Curve k = Measure(c, "slackfit", /*shed=*/false);
  std::printf("no shedding, %s slackfit: best<=peak %.0f, 1.25x %.0f, 2x %.0f (ratio %.3f)\n",
              c.name.c_str(), k.best_at_or_below_peak, k.at_125, k.at_200, k.worst_ratio());
  EXPECT_LT(k.worst_ratio(), 0.9);
}

}  // namespace
}  // namespace superserve
