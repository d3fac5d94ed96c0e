#include "planner/application_planner.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "planner/application_file.h"
#include "tests/planner/planner_test_util.h"

namespace superserve {
namespace {

using testing::TableOneM1;
using testing::TableOneM2;
using testing::TableOneM3;

std::string TestData(const std::string& name) {
  return std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/tests/planner/testdata/" + name;
}

Application Chain() {
  Application app;
  app.name = "chain";
  app.modules.push_back({TableOneM1(), 1.0, {}});
  app.modules.push_back({TableOneM2(), 1.0, {"M1"}});
  app.modules.push_back({TableOneM3(), 1.0, {"M2"}});
  return app;
}

// The least cost over every split of the objective on a 10 ms grid (Harpagon's
// Harp-q0.01 search, exhaustive over the grid) for the chain M1 -> M2 -> M3.
double GridOptimum(const Application& app, double rate, double slo, PlanMethod method) {
  double best = INFINITY;
  const int steps = static_cast<int>(std::floor(slo / 0.01 + 1e-9));
  for (int a = 1; a < steps; ++a) {
    auto p1 = PlanModule(app.modules[0].module, rate, a * 0.01, method);
    if (!p1.ok()) continue;
    for (int b = 1; a + b < steps; ++b) {
      auto p2 = PlanModule(app.modules[1].module, rate, b * 0.01, method);
      if (!p2.ok()) continue;
      auto p3 = PlanModule(app.modules[2].module, rate, slo - (a + b) * 0.01, method);
      if (!p3.ok()) continue;
      best = std::min(best, p1->cost + p2->cost + p3->cost);
    }
  }
  return best;
}

TEST(ApplicationPlannerTest, SplitsAChainWithinTheObjectiveAndBeatsAnEvenSplit) {
  const Application app = Chain();
  int workloads = 0, at_grid = 0;
  double worst_ratio = 0;
  for (double rate : {50.0, 100.0, 198.0}) {
    for (double slo : {1.2, 1.6, 2.4}) {
      auto plan = PlanApplication(app, rate, slo, PlanMethod::kHarpagon);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_EQ(plan->modules.size(), 3u);
      double budgets = 0, cost = 0;
      for (const PlannedModule& m : plan->modules) {
        EXPECT_TRUE(WithinBudget(m.plan.worst_latency_s, m.plan.budget_s)) << m.name;
        EXPECT_NEAR(m.rate, rate, 1e-12);
        budgets += m.plan.worst_latency_s;
        cost += m.plan.cost;
      }
      EXPECT_TRUE(WithinBudget(budgets, slo)) << "rate " << rate << " slo " << slo;
      EXPECT_NEAR(plan->latency_s, budgets, 1e-9);
      EXPECT_NEAR(plan->cost, cost, 1e-9);

      // An even split (Clipper's way) is never cheaper.
      double even = 0;
      for (const ApplicationModule& m : app.modules) {
        auto p = PlanModule(m.module, rate, slo / 3, PlanMethod::kHarpagon);
        even += p.ok() ? p->cost : INFINITY;
      }
      EXPECT_LE(plan->cost, even + 1e-9) << "rate " << rate << " slo " << slo;

      const double grid = GridOptimum(app, rate, slo, PlanMethod::kHarpagon);
      ++workloads;
      if (plan->cost <= grid + 1e-9) ++at_grid;
      worst_ratio = std::max(worst_ratio, plan->cost / grid);
      std::printf(
          "chain M1-M2-M3 at %.0f req/s, objective %.1f s: cost %.3f (split %d steps, "
          "%d reassignments), even split %.3f, 10 ms grid optimum %.3f\n",
          rate, slo, plan->cost, plan->split_iterations, plan->reassignments, even, grid);
    }
  }
  std::printf(
      "latency splitting: at or below the 10 ms grid optimum on %d of %d workloads, "
      "worst %.1f %% above it\n",
      at_grid, workloads, 100 * (worst_ratio - 1));
  // Measured: at the grid optimum on 4 of 9, at most 1.8 % above it (the
  // paper: the 10 ms quantized search beats Harpagon on 7.3 % of its
  // workloads); see docs/planning.md.
  EXPECT_GE(at_grid, 4);
  EXPECT_LE(worst_ratio, 1.02);
}

TEST(ApplicationPlannerTest, ParallelBranchesShareTheObjective) {
  // A -> {B, C} -> D: every path A-B-D and A-C-D within the objective; C sees
  // two requests per application request.
  Application app;
  app.modules.push_back({testing::MakeModule("A", {{2, 0.1}, {8, 0.25}, {32, 0.8}}), 1.0, {}});
  app.modules.push_back({TableOneM1(), 1.0, {"A"}});
  app.modules.back().module.name = "B";
  app.modules.push_back({TableOneM2(), 2.0, {"A"}});
  app.modules.back().module.name = "C";
  app.modules.push_back({TableOneM3(), 1.0, {"B", "C"}});
  app.modules.back().module.name = "D";
  for (PlanMethod method : {PlanMethod::kS1, PlanMethod::kS2, PlanMethod::kS3, PlanMethod::kS4,
                            PlanMethod::kHarpagon}) {
    auto plan = PlanApplication(app, 120, 2.0, method);
    ASSERT_TRUE(plan.ok()) << PlanMethodName(method) << ": " << plan.status();
    const auto lat = [&](int i) { return plan->modules[i].plan.worst_latency_s; };
    EXPECT_TRUE(WithinBudget(lat(0) + lat(1) + lat(3), 2.0)) << PlanMethodName(method);
    EXPECT_TRUE(WithinBudget(lat(0) + lat(2) + lat(3), 2.0)) << PlanMethodName(method);
    EXPECT_NEAR(plan->modules[2].rate, 240, 1e-9);
    EXPECT_NEAR(plan->latency_s, std::max(lat(0) + lat(1) + lat(3), lat(0) + lat(2) + lat(3)),
                1e-9);
  }
}

TEST(ApplicationPlannerTest, TooTightAnObjectiveIsAnError) {
  auto plan = PlanApplication(Chain(), 100, 0.3, PlanMethod::kHarpagon);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PlanApplication(Chain(), 100, -1, PlanMethod::kHarpagon).status().code(),
            absl::StatusCode::kInvalidArgument);
  Application cycle = Chain();
  cycle.modules[0].after = {"M3"};
  EXPECT_EQ(PlanApplication(cycle, 100, 2, PlanMethod::kHarpagon).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A rate x rate_factor beyond the worker bound, or not finite, is an error
// naming the module; so is a sum over modules beyond it (each within it).
TEST(ApplicationPlannerTest, TooManyWorkersIsAnErrorNotAnOverflow) {
  Application huge = Chain();
  huge.modules[1].rate_factor = 1e300;
  for (double rate : {100.0, 1e10}) {
    auto plan = PlanApplication(huge, rate, 2.4, PlanMethod::kHarpagon);
    ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << "rate " << rate;
    EXPECT_NE(plan.status().message().find("module M2"), absl::string_view::npos)
        << plan.status();
  }
  Application one;
  one.name = "one";
  one.modules.push_back({TableOneM3(), 1e300, {}});
  EXPECT_EQ(PlanApplication(one, 100, 1.0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Two M3 modules in parallel at 3e9 req/s: 7.5e7 workers each, 1.5e8 in all.
  Application pair;
  pair.name = "pair";
  pair.modules.push_back({testing::MakeModule("a", {{32, 0.8}}), 1.0, {}});
  pair.modules.push_back({testing::MakeModule("b", {{32, 0.8}}), 1.0, {}});
  auto plan = PlanApplication(pair, 3e9, 1.0, PlanMethod::kS3);
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  EXPECT_NE(plan.status().message().find("application pair"), absl::string_view::npos)
      << plan.status();
  auto half = PlanApplication(pair, 1.5e9, 1.0, PlanMethod::kS3);
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ(half->workers, 75000000);
}

TEST(ApplicationFileTest, LoadsTheChainAndAProfile) {
  auto app = LoadApplicationFile(TestData("table1_chain.json"));
  ASSERT_TRUE(app.ok()) << app.status();
  ASSERT_EQ(app->modules.size(), 3u);
  EXPECT_EQ(app->name, "table1-chain");
  EXPECT_EQ(app->modules[2].module.configs.size(), 3u);
  EXPECT_NEAR(app->modules[2].module.configs[2].duration_s, 0.8, 1e-12);
  EXPECT_EQ(app->modules[1].after, std::vector<std::string>{"M1"});

  auto single = LoadApplicationFile(TestData("harpagon_m3_profile.json"));
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_EQ(single->modules.size(), 1u);
  auto plan = PlanApplication(*single, 198, 1.0, PlanMethod::kS3);
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(plan->cost, 5.3, 1e-9);
}

// superserve-plan reads the profile format the router does: sizes that are
// not powers of two, the linear form, a dipping table (raised, with a
// warning the binary prints).
TEST(ApplicationFileTest, LoadsAProfileOfAnyFormWithItsWarnings) {
  auto linear = ParseApplicationJson(R"({"model": "r50", "batch_sizes": [1, 3, 7, 20],
      "subnets": [{"id": 0, "accuracy": 76, "alpha_us": 1053, "beta_us": 5072}]})",
                                     ".");
  ASSERT_TRUE(linear.ok()) << linear.status();
  ASSERT_EQ(linear->modules.size(), 1u);
  const auto& configs = linear->modules[0].module.configs;
  ASSERT_EQ(configs.size(), 4u);
  EXPECT_EQ(configs[2].batch, 7);
  EXPECT_NEAR(configs[2].duration_s, (1053.0 * 7 + 5072) * 1e-6, 1e-12);
  EXPECT_TRUE(linear->warnings.empty());
  auto plan = PlanApplication(*linear, 1000, 0.1, PlanMethod::kS3);
  ASSERT_TRUE(plan.ok()) << plan.status();

  auto dipping = ParseApplicationJson(R"({"model": "bert", "batch_sizes": [1, 4, 8],
      "subnets": [{"id": 0, "accuracy": 80, "latency_us": [1000, 3200.5, 3176.5]}]})",
                                      ".");
  ASSERT_TRUE(dipping.ok()) << dipping.status();
  EXPECT_NEAR(dipping->modules[0].module.configs[2].duration_s, 3200.5e-6, 1e-12);
  ASSERT_EQ(dipping->warnings.size(), 1u);
  EXPECT_NE(dipping->warnings[0].find("latency_us[2] (batch 8) = 3176.5 is below batch 4's "
                                      "3200.5; raised to 3200.5"),
            std::string::npos)
      << dipping->warnings[0];
}

TEST(ApplicationFileTest, BadFilesAreClearErrors) {
  const std::string dir = ".";
  auto bad = [&](const std::string& json) { return ParseApplicationJson(json, dir).status(); };
  EXPECT_FALSE(bad("").ok());
  EXPECT_FALSE(bad("[1, 2]").ok());
  EXPECT_FALSE(bad("{\"modules\": 3}").ok());
  EXPECT_FALSE(bad("{\"modules\": []}").ok());
  EXPECT_FALSE(bad("{\"modules\": [{\"batches\": [{\"batch\": 2, \"duration_ms\": 5}]}]}").ok());
  EXPECT_FALSE(bad("{\"modules\": [{\"name\": \"a\"}]}").ok());
  EXPECT_FALSE(
      bad("{\"modules\": [{\"name\": \"a\", \"batches\": [{\"batch\": 2, \"duration_ms\": 5}], "
          "\"colour\": 1}]}")
          .ok());
  EXPECT_FALSE(
      bad("{\"modules\": [{\"name\": \"a\", \"batches\": [{\"batch\": 2.5, \"duration_ms\": 5}]}]}")
          .ok());
  EXPECT_FALSE(
      bad("{\"modules\": [{\"name\": \"a\", \"batches\": [{\"batch\": 2, \"duration_ms\": -5}]}]}")
          .ok());
  EXPECT_FALSE(bad("{\"modules\": [{\"name\": \"a\", \"after\": [\"b\"], \"batches\": [{\"batch\": "
                   "2, \"duration_ms\": 5}]}]}")
                   .ok());
  EXPECT_FALSE(bad("{\"modules\": [{\"name\": \"a\", \"profile\": \"missing.json\"}]}").ok());
  EXPECT_FALSE(
      bad("{\"modules\": [{\"name\": \"a\", \"profile\": \"x.json\", \"batches\": []}]}").ok());
  EXPECT_FALSE(LoadApplicationFile("/nonexistent/file.json").ok());
  const absl::Status st =
      bad("{\"modules\": [{\"name\": \"a\", \"batches\": [{\"batch\": 2, \"duration_ms\": 5}], "
          "\"colour\": 1}]}");
  EXPECT_NE(st.message().find("colour"), absl::string_view::npos) << st;
}

}  // namespace
}  // namespace superserve
