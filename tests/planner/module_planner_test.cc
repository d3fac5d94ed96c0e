#include "planner/module_planner.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/planner/planner_test_util.h"

namespace superserve {
namespace {

using testing::TableOneM1;
using testing::TableOneM3;

struct Tuple {
  double rate;
  double machines;
  int batch;
};

void ExpectTuples(const ModulePlan& plan, const std::vector<Tuple>& want, const std::string& what) {
  const std::vector<MachineGroup> got = plan.Tuples();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].rate, want[i].rate, 1e-9) << what << " tuple " << i;
    EXPECT_NEAR(got[i].machines, want[i].machines, 1e-9) << what << " tuple " << i;
    EXPECT_EQ(got[i].config.batch, want[i].batch) << what << " tuple " << i;
  }
}

ModulePlan Plan(const Module& m, double rate, double budget, PlanMethod method) {
  auto p = PlanModule(m, rate, budget, method);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : ModulePlan{};
}

// Harpagon Table II: module M3 at 198 req/s with a 1.0 s objective.
TEST(ModulePlannerTest, ReproducesTableTwoExactly) {
  const Module m3 = TableOneM3();
  const ModulePlan s1 = Plan(m3, 198, 1.0, PlanMethod::kS1);
  ExpectTuples(s1, {{192, 6.0, 8}, {6, 0.3, 2}}, "S1");
  EXPECT_NEAR(s1.cost, 6.3, 1e-9);

  const ModulePlan s2 = Plan(m3, 198, 1.0, PlanMethod::kS2);
  ExpectTuples(s2, {{160, 4.0, 32}, {38, 1.9, 2}}, "S2");
  EXPECT_NEAR(s2.cost, 5.9, 1e-9);

  const ModulePlan s3 = Plan(m3, 198, 1.0, PlanMethod::kS3);
  ExpectTuples(s3, {{160, 4.0, 32}, {32, 1.0, 8}, {6, 0.3, 2}}, "S3");
  EXPECT_NEAR(s3.cost, 5.3, 1e-9);

  const ModulePlan s4 = Plan(m3, 198, 1.0, PlanMethod::kS4);
  ExpectTuples(s4, {{200, 5.0, 32}}, "S4");
  EXPECT_NEAR(s4.cost, 5.0, 1e-9);
  EXPECT_NEAR(s4.dummy_rate, 2.0, 1e-9);
  EXPECT_EQ(s4.workers(), 5);

  const ModulePlan full = Plan(m3, 198, 1.0, PlanMethod::kHarpagon);
  EXPECT_NEAR(full.cost, 5.0, 1e-9);

  for (const ModulePlan* p : {&s1, &s2, &s3, &s4}) {
    EXPECT_LE(p->worst_latency_s, 1.0 + 1e-9);
    double rate = 0;
    for (const MachineGroup& g : p->groups) rate += g.rate;
    EXPECT_NEAR(rate, 198 + p->dummy_rate, 1e-9);
  }
  // S1's partial machine collects at its own 6 req/s: 0.1 + 2 / 6 s.
  EXPECT_NEAR(s1.groups.back().worst_latency_s, 0.1 + 2.0 / 6, 1e-9);
  // S4's five b = 32 machines collect at the whole 200 req/s.
  EXPECT_NEAR(s4.worst_latency_s, 0.8 + 32.0 / 200, 1e-9);
}

// §II's example: M1 at 100 req/s, objective 0.4 s. Round-robin (2d) allows
// batch 4 (5 machines); batch-aware dispatch (d + b / T = 0.4) allows batch 8
// (4 machines).
TEST(ModulePlannerTest, BatchAwareDispatchAllowsLargerBatches) {
  const ModulePlan rr = Plan(TableOneM1(), 100, 0.4, PlanMethod::kS1);
  ExpectTuples(rr, {{100, 5.0, 4}}, "round-robin");
  const ModulePlan ba = Plan(TableOneM1(), 100, 0.4, PlanMethod::kS2);
  ExpectTuples(ba, {{100, 4.0, 8}}, "batch-aware");
}

// Theorem 1's example (§III-B): module M4 at 8 req/s; machines A, B (b = 6,
// d = 2.0 s) share 6 req/s in turn, C (b = 2, d = 1.0 s) takes 2 req/s.
// TC dispatch: A and B collect at 8 req/s, worst case 2 + 6 / 8 = 2.75 s.
TEST(ModulePlannerTest, WorstCaseLatencyFollowsTheoremOne) {
  ModulePlan p;
  MachineGroup ab;
  ab.config = {6, 2.0};
  ab.rate = 6;
  ab.machines = 2;
  MachineGroup c;
  c.config = {2, 1.0};
  c.rate = 2;
  c.machines = 1;
  p.groups = {ab, c};
  AnnotateWorstLatency(Dispatch::kBatchAware, &p);
  EXPECT_NEAR(p.groups[0].worst_latency_s, 2.75, 1e-12);
  EXPECT_NEAR(p.groups[1].worst_latency_s, 2.0, 1e-12);
  EXPECT_NEAR(p.worst_latency_s, 2.75, 1e-12);
  // Round-robin: each machine collects its batch at its own 3 req/s.
  AnnotateWorstLatency(Dispatch::kRoundRobin, &p);
  EXPECT_NEAR(p.groups[0].worst_latency_s, 4.0, 1e-12);
}

TEST(ModulePlannerTest, EveryMethodMeetsItsBudgetAndDummiesNeverCostMore) {
  const Module m3 = TableOneM3();
  for (double rate : {1.0, 7.0, 19.0, 41.0, 99.5, 198.0, 400.0, 1234.0}) {
    for (double budget : {0.3, 0.6, 1.0, 2.0}) {
      double s3_cost = INFINITY;
      for (PlanMethod method :
           {PlanMethod::kS1, PlanMethod::kS2, PlanMethod::kS3, PlanMethod::kS4}) {
        auto p = PlanModule(m3, rate, budget, method);
        if (!p.ok()) {
          EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
          continue;
        }
        EXPECT_TRUE(WithinBudget(p->worst_latency_s, budget))
            << PlanMethodName(method) << " rate " << rate << " budget " << budget;
        double total = 0;
        for (const MachineGroup& g : p->groups) total += g.rate;
        EXPECT_GE(total, rate * (1 - 1e-12));
        EXPECT_NEAR(total, rate + p->dummy_rate, 1e-9 * rate);
        if (method == PlanMethod::kS3) s3_cost = p->cost;
        // S4 starts from S3's plan and keeps it unless dummies make it cheaper.
        if (method == PlanMethod::kS4) {
          EXPECT_LE(p->cost, s3_cost + 1e-9) << "rate " << rate;
        }
      }
    }
  }
}

TEST(ModulePlannerTest, DummyRequestsMakeALowRateFeasible) {
  // Only batch 32 (d = 0.8 s): at 10 req/s it collects for 3.2 s. With
  // 160 req/s of collection rate it meets 1.0 s, so S4 pads with dummies.
  const Module big = testing::MakeModule("big", {{32, 0.8}});
  EXPECT_EQ(PlanModule(big, 10, 1.0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto p = PlanModule(big, 10, 1.0, PlanMethod::kS4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->dummy_rate, 150, 1e-6);
  EXPECT_NEAR(p->cost, 4.0, 1e-6);
  EXPECT_TRUE(WithinBudget(p->worst_latency_s, 1.0));
}

TEST(ModulePlannerTest, RateZeroNeedsNothing) {
  auto p = PlanModule(TableOneM3(), 0, 1.0, PlanMethod::kHarpagon);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cost, 0);
  EXPECT_EQ(p->workers(), 0);
}

// A tiny positive rate is still workload: it needs a machine, not an empty
// plan (an absolute 1e-9 rounding floor once gave 0 workers at 1e-9 req/s).
TEST(ModulePlannerTest, AnyPositiveRateGetsAWorker) {
  for (double rate : {1e-300, 1e-12, 1e-9, 1e-7, 0.5}) {
    for (PlanMethod method : {PlanMethod::kS4, PlanMethod::kHarpagon}) {
      auto p = PlanModule(TableOneM3(), rate, 1.0, method);
      ASSERT_TRUE(p.ok()) << p.status() << " rate " << rate;
      EXPECT_GE(p->workers(), 1) << PlanMethodName(method) << " rate " << rate;
      EXPECT_GT(p->cost, 0) << PlanMethodName(method) << " rate " << rate;
      EXPECT_TRUE(WithinBudget(p->worst_latency_s, 1.0));
    }
    // Without dummies no batch fills in time at such a rate: an error, not 0 workers.
    EXPECT_EQ(PlanModule(TableOneM3(), rate, 1.0, PlanMethod::kS3).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << "rate " << rate;
  }
}

// A budget below the fastest batch's duration (M3: batch 2, 100 ms) has no
// plan at any rate, and the error says so.
TEST(ModulePlannerTest, BudgetBelowTheFastestBatchIsAnError) {
  for (double rate : {1e-9, 198.0}) {
    for (PlanMethod method : {PlanMethod::kS1, PlanMethod::kS2, PlanMethod::kS3, PlanMethod::kS4,
                              PlanMethod::kHarpagon}) {
      for (double budget : {1e-9, 0.0999}) {
        auto p = PlanModule(TableOneM3(), rate, budget, method);
        ASSERT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition)
            << PlanMethodName(method) << " rate " << rate << " budget " << budget;
        EXPECT_NE(p.status().message().find("below the fastest configuration's latency (batch 2: "
                                            "100 ms)"),
                  absl::string_view::npos)
            << p.status();
      }
    }
  }
}

// More workers than kMaxPlannedWorkers is an error, never an int32 overflow
// (1e11 req/s on M3's 40 req/s machines once gave -2147483648 workers).
TEST(ModulePlannerTest, TooManyWorkersIsAnErrorNotAnOverflow) {
  for (PlanMethod method : {PlanMethod::kS1, PlanMethod::kS2, PlanMethod::kS3, PlanMethod::kS4,
                            PlanMethod::kHarpagon}) {
    for (double rate : {1e11, 1e300}) {
      auto p = PlanModule(TableOneM3(), rate, 1.0, method);
      ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument)
          << PlanMethodName(method) << " rate " << rate;
      EXPECT_NE(p.status().message().find("workers, more than the 1e+08"), absl::string_view::npos)
          << p.status();
    }
    // Up to the bound the count is exact: 3.2e9 req/s on batch 32 (40 req/s
    // a machine) is 8e7 machines; S1's round-robin needs batch 8 (32 req/s),
    // exactly the 1e8 of the bound.
    auto p = PlanModule(TableOneM3(), 3.2e9, 1.0, method);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->workers(), method == PlanMethod::kS1 ? 100000000 : 80000000)
        << PlanMethodName(method);
  }
}

TEST(ModulePlannerTest, BadInputIsAnErrorNotACrash) {
  const Module m3 = TableOneM3();
  EXPECT_EQ(PlanModule(m3, -1, 1.0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanModule(m3, NAN, 1.0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanModule(m3, INFINITY, 1.0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanModule(m3, 10, 0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanModule(m3, 10, 0.05, PlanMethod::kHarpagon).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Module empty;
  EXPECT_EQ(PlanModule(empty, 10, 1.0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kInvalidArgument);
  Module zero = testing::MakeModule("zero", {{2, 0.0}});
  EXPECT_EQ(PlanModule(zero, 10, 1.0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kInvalidArgument);
  Module twice = testing::MakeModule("twice", {{2, 0.1}, {2, 0.2}});
  EXPECT_EQ(PlanModule(twice, 10, 1.0, PlanMethod::kS3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParsePlanMethod("s5").ok());
  EXPECT_EQ(*ParsePlanMethod("harpagon"), PlanMethod::kHarpagon);
}

}  // namespace
}  // namespace superserve
