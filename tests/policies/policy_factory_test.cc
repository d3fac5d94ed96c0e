#include "policies/policy_factory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "policies/greedy_policies.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

using testing::ThreeSubnetProfile;

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
  auto bad = MakePolicy("clipper+", p, c);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("--fixed_subnet"));
  c.slackfit.num_buckets = 0;
  EXPECT_FALSE(MakePolicy("slackfit", p, c).ok());
  EXPECT_FALSE(MakePolicy("slackfit", ModelProfile(), PolicyConfig()).ok()) << "no subnets";
}

TEST(PolicyFactoryTest, KnowsThePoliciesAndRejectsUnknownNames) {
  auto names = PolicyNames();
  EXPECT_THAT(names, ::testing::IsSupersetOf({"ratefit", "slackfit", "slackfit-ma", "slackfit-rg", "maxbatch",
                                              "maxacc", "clipper+", "infaas"}));
  auto unknown = MakePolicy("nope", ThreeSubnetProfile(), {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), ::testing::HasSubstr("slackfit"))
      << "the error lists the known names";
}

TEST(PolicyFactoryTest, ClipperWithoutASubnetServesTheMostAccurate) {
  auto p = MakePolicy("clipper+", ThreeSubnetProfile(), PolicyConfig());  // fixed_subnet_id -1
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->name(), "clipper+(80)");
  PolicyConfig c;
  c.fixed_subnet_id = 100;
  p = MakePolicy("clipper+", ThreeSubnetProfile(), c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->name(), "clipper+(70)");
}

TEST(PolicyFactoryTest, RegisteredPoliciesAreMadeAndListed) {
  int calls = 0;
  RegisterPolicy("test-least-accurate",
                 [&calls](const ModelProfile& profile, const PolicyConfig& config)
                     -> absl::StatusOr<std::unique_ptr<Policy>> {
                   ++calls;
                   EXPECT_EQ(config.slackfit.num_buckets, 5);
                   return std::make_unique<FixedSubnetPolicy>("test-least-accurate", profile, 0,
                                                              config.slackfit.base);
                 });
  auto names = PolicyNames();
  EXPECT_THAT(names, ::testing::Contains("test-least-accurate"));
  EXPECT_THAT(names, ::testing::Contains("slackfit"));
  PolicyConfig c;
  c.slackfit.num_buckets = 5;
  auto p = MakePolicy("test-least-accurate", ThreeSubnetProfile(), c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->name(), "test-least-accurate");
  EXPECT_EQ(calls, 1);
  // Registering again replaces it; a registered name is listed once.
  RegisterPolicy("test-least-accurate", [](const ModelProfile&, const PolicyConfig&)
                                            -> absl::StatusOr<std::unique_ptr<Policy>> {
    return absl::UnavailableError("replaced");
  });
  EXPECT_EQ(MakePolicy("test-least-accurate", ThreeSubnetProfile(), c).status().code(),
            absl::StatusCode::kUnavailable);
  names = PolicyNames();
  EXPECT_EQ(std::count(names.begin(), names.end(), "test-least-accurate"), 1);
}

TEST(PolicySpecJsonTest, NamesEveryOption) {
  PolicySpec spec;
  spec.config.slackfit.bucket_ties = LatencyBuckets::Ties::kAccuracy;
  const std::string json = PolicySpecJson(spec);
  for (const char* field :
       {"\"policy\":\"ratefit\"", "\"fixed_subnet_id\":-1", "\"ratefit_pace\":1",
        "\"ratefit_capacity_quantile\":0.99", "\"num_buckets\":8",
        "\"drop_below_first_bucket\":false", "\"bucket_ties\":\"accuracy\"", "\"guard_headroom\"",
        "\"guard_upgrades_only\":true", "\"rate_window_ns\":100000000", "\"fit_margin\"",
        "\"initial_overhead_ns\":500000", "\"overhead_quantile\":0.5",
        "\"unmeasured_follow_drift\":true", "\"drift_min_tuples\":2", "\"startup_drift\":true", "\"telemetry_expiry_ns\"", "\"min_samples\":16"}) {
    EXPECT_THAT(json, ::testing::HasSubstr(field));
  }
  EXPECT_EQ(json.find('\n'), std::string::npos) << "one line";
}

}  // namespace
}  // namespace superserve
