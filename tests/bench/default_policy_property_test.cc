// The default policy's promises (bench/sim/policy_verdict.h) on generated
// profiles and traces it was never tuned on: the held-out seeds of
// bench/sim/scheduling_cases.h (kHeldOutSeedBase). Nobody looks at these
// cases while designing a policy; `superserve-bench policy-properties tune`
// is the set to look at.
//
// Asserted on every case, each against references run on the same case:
//   - attainment >= every other shipped policy's (symphony) - 0.005;
//   - on one-subnet profiles, goodput at >= 0.99 >= 0.97 x symphony's.
// Printed for every case, and summarised (minimum, 5th percentile, median),
// but not asserted, because the default does not yet meet them on every
// case (docs/scheduling.md, "Where the default falls short"):
//   - attainment >= the best fixed subnet's - 0.005;
//   - where a fixed subnet holds 0.999: attainment >= 0.999 and accuracy >=
//     the most accurate such subnet's - 0.3 points.
// The policy under test is PolicySpec().name, or POLICY_UNDER_TEST (the
// mutation check: POLICY_UNDER_TEST=clipper+ fails the goodput promise).
// Four shards of 15 cases, so that ctest runs them side by side.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/sim/policy_verdict.h"
#include "bench/sim/scheduling_cases.h"
#include "gtest/gtest.h"
#include "policies/policy_factory.h"

namespace superserve {
namespace {

constexpr int kShards = 4;
constexpr int kCasesPerShard = 15;

std::string PolicyUnderTest() {
  const char* env = std::getenv("POLICY_UNDER_TEST");
  return env != nullptr && *env != '\0' ? env : PolicySpec().name;
}

class DefaultPolicyPropertyTest : public ::testing::TestWithParam<int> {};

TEST_P(DefaultPolicyPropertyTest, PromisesHoldOnHeldOutCases) {
  const std::string policy = PolicyUnderTest();
  int one_subnet = 0;
  for (int i = 0; i < kCasesPerShard; ++i) {
    const SchedulingCase c =
        MakeSchedulingCase(kHeldOutSeedBase + GetParam() * kCasesPerShard + i);
    const CaseVerdict v = JudgeCase(c, policy, PolicyConfig(), {"symphony"});
    std::printf("%s | att %.4f acc %.2f | to fixed %+.4f | to %s %+.4f | %s\n", v.label.c_str(),
                v.outcome.attainment, v.outcome.accuracy, v.MarginToFixed(),
                v.best_other.c_str(), v.MarginToOthers(),
                v.HasEnvelope()
                    ? absl::StrFormat("to 0.999 %+.4f, to the envelope %+.2f points",
                                      v.MarginToHold(), v.MarginToEnvelope())
                          .c_str()
                    : "no fixed subnet holds 0.999");
    EXPECT_GE(v.MarginToOthers(), -kAttainmentTolerance)
        << v.label << ": " << policy << " attains " << v.outcome.attainment << ", "
        << v.best_other << " " << v.best_other_attainment;
    if (c.profile.subnets.size() == 1) {
      ++one_subnet;
      const GoodputVerdict g = JudgeGoodput(c, policy, "symphony", PolicyConfig());
      std::printf("  goodput at 0.99: %.0f q/s, symphony %.0f (x%.3f)\n", g.policy_rate,
                  g.reference_rate, g.Ratio());
      EXPECT_GE(g.Ratio(), kGoodputRatio) << v.label << ": " << policy << " keeps 0.99 up to "
                                          << g.policy_rate << " q/s, symphony up to "
                                          << g.reference_rate;
    }
  }
  std::printf("shard %d: %d one-subnet cases\n", GetParam(), one_subnet);
}

INSTANTIATE_TEST_SUITE_P(HeldOut, DefaultPolicyPropertyTest, ::testing::Range(0, kShards));

}  // namespace
}  // namespace superserve
