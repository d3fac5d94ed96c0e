// The generated scheduling cases (bench/sim/scheduling_cases.h) cover what
// the default policy is to be judged on, and the verdicts
// (bench/sim/policy_verdict.h) compute what they say.
#include "bench/sim/scheduling_cases.h"

#include <algorithm>
#include <set>

#include "bench/sim/policy_verdict.h"
#include "gtest/gtest.h"

namespace superserve {
namespace {

bool PowersOfTwo(const std::vector<int32_t>& sizes) {
  for (int32_t b : sizes) {
    if ((b & (b - 1)) != 0) return false;
  }
  return true;
}

TEST(SchedulingCasesTest, ACaseIsAFunctionOfItsSeed) {
  const SchedulingCase a = MakeSchedulingCase(7), b = MakeSchedulingCase(7);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.arrivals, b.arrivals);
  EXPECT_EQ(a.profile.batch_sizes, b.profile.batch_sizes);
  EXPECT_NE(MakeSchedulingCase(8).label, a.label);
}

TEST(SchedulingCasesTest, TheTwoSeedSetsAreDisjoint) {
  // The tune set is read from kTuneSeedBase up; a developer looks at far
  // fewer than a million of them.
  EXPECT_GE(kHeldOutSeedBase - kTuneSeedBase, 1000000u);
}

TEST(SchedulingCasesTest, CasesSpanTheRangesTheyPromise) {
  std::set<CaseShape> shapes;
  std::set<CaseTrace> traces;
  bool one_subnet = false, many_subnets = false, not_powers = false, powers = false;
  bool under = false, over = false;
  for (uint64_t seed = kTuneSeedBase; seed < kTuneSeedBase + 200; ++seed) {
    const SchedulingCase c = MakeSchedulingCase(seed);
    shapes.insert(c.shape);
    traces.insert(c.trace);
    const ModelProfile& p = c.profile;
    ASSERT_GE(p.subnets.size(), 1u);
    ASSERT_LE(p.subnets.size(), 100u);
    one_subnet |= p.subnets.size() == 1;
    many_subnets |= p.subnets.size() > 20;
    (PowersOfTwo(p.batch_sizes) ? powers : not_powers) = true;
    ASSERT_TRUE(std::is_sorted(p.batch_sizes.begin(), p.batch_sizes.end()));
    ASSERT_EQ(p.batch_sizes.front(), 1);
    Nanos l1 = p.subnets[0].latency[0];
    for (const auto& s : p.subnets) {
      ASSERT_EQ(s.latency.size(), p.batch_sizes.size());
      ASSERT_TRUE(std::is_sorted(s.latency.begin(), s.latency.end())) << c.label;
      EXPECT_LE(s.latency.back(), Millis(500)) << c.label;
      l1 = std::min(l1, s.latency[0]);
    }
    EXPECT_GE(l1, Micros(500)) << c.label;
    EXPECT_GE(c.sim.slo, l1 + l1 / 2) << c.label;
    EXPECT_LE(c.sim.slo, 20 * l1 + l1 / 2 + c.sim.dispatch_overhead) << c.label;
    EXPECT_GE(c.load, 0.3);
    EXPECT_LE(c.load, 3.0);
    under |= c.load < 1;
    over |= c.load > 2;
    ASSERT_FALSE(c.arrivals.empty()) << c.label;
    EXPECT_TRUE(std::is_sorted(c.arrivals.begin(), c.arrivals.end()));
    EXPECT_LE(c.arrivals.size(), 60000u) << c.label;
  }
  EXPECT_EQ(shapes.size(), 3u);
  EXPECT_EQ(traces.size(), 5u);
  EXPECT_TRUE(one_subnet && many_subnets && powers && not_powers && under && over);
}

TEST(SchedulingCasesTest, CapacityIsTheBestBatchThatFitsTheSlo) {
  ModelProfile p;
  p.batch_sizes = {1, 3, 10};
  SubnetProfile s;
  s.id = 0;
  s.latency = {Millis(2), Millis(3), Millis(20)};
  p.subnets.push_back(s);
  // 3 / 3 ms = 1000 q/s per worker (batch 10 does not fit 15 ms); 4 workers.
  EXPECT_DOUBLE_EQ(SubnetCapacity(p, 0, 4, Millis(15), 0), 4000);
  // With 1 ms of overhead: 3 / 4 ms.
  EXPECT_DOUBLE_EQ(SubnetCapacity(p, 0, 1, Millis(15), Millis(1)), 750);
  EXPECT_DOUBLE_EQ(SubnetCapacity(p, 0, 1, Millis(1), 0), 0);
}

TEST(PolicyVerdictTest, APolicyJudgedAgainstItselfHasNoMargin) {
  // A one-subnet case: the fixed subnet is the policy's only choice, so
  // fixed-subnet judged against the references is its own best fixed subnet.
  SchedulingCase c;
  for (uint64_t seed = kTuneSeedBase;; ++seed) {
    c = MakeSchedulingCase(seed);
    if (c.profile.subnets.size() == 1) break;
  }
  const CaseVerdict v = JudgeCase(c, "fixed-subnet", PolicyConfig(), {"fixed-subnet"});
  EXPECT_EQ(v.fixed_runs, 1);
  EXPECT_DOUBLE_EQ(v.MarginToFixed(), 0);
  EXPECT_DOUBLE_EQ(v.MarginToOthers(), 0);
  EXPECT_EQ(v.HasEnvelope(), v.outcome.attainment >= kHold);
}

TEST(PolicyVerdictTest, SummaryIsMinimumFifthPercentileAndMedian) {
  std::vector<double> m;
  for (int i = 100; i >= 0; --i) m.push_back(i);  // 0..100, any order
  const MarginSummary s = Summarize(m);
  EXPECT_EQ(s.count, 101);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.p5, 5);
  EXPECT_EQ(s.median, 50);
  EXPECT_EQ(Summarize({}).count, 0);
}

}  // namespace
}  // namespace superserve
