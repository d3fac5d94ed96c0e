#include "policies/policy_factory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
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

// Orloj's score parameters are checked where every caller's configuration
// passes: 100000 histogram bins made each decision scan 100000 groups per
// batch size and application (and overflowed the int16 group index).
TEST(PolicyFactoryTest, RejectsOrlojParametersOutOfRange) {
  ModelProfile p;
  p.model = "dyn";
  p.batch_sizes = {1, 2};
  p.is_dynamic = true;
  p.dynamic.batch_overhead_us = 100;
  p.dynamic.per_request_factor = 1;
  ApplicationHistogram a;
  a.application = "a";
  a.bin_edges_us = {1000, 2000};
  a.counts = {1};
  p.dynamic.applications.push_back(a);
  PolicyConfig ok;
  ok.orloj.score.grid_bins = OrlojScoreTable::kMaxGridBins;
  ok.orloj.score.viable_quantile = 1;
  ASSERT_TRUE(MakePolicy("orloj", p, ok).ok());
  const struct {
    std::function<void(OrlojScoreTable::Params&)> set;
    std::string want;
  } bad[] = {
      {[](auto& s) { s.grid_bins = 100000; }, "grid_bins must be in [1, 1024]; got 100000"},
      {[](auto& s) { s.grid_bins = 0; }, "grid_bins"},
      {[](auto& s) { s.viable_quantile = 2; }, "viable_quantile must be in (0, 1]; got 2"},
      {[](auto& s) { s.viable_quantile = std::nan(""); }, "viable_quantile"},
      {[](auto& s) { s.viable_quantile = 0; }, "viable_quantile"},
      {[](auto& s) { s.b_per_us = std::numeric_limits<double>::infinity(); },
       "b_per_us must be finite and > 0; got inf"},
      {[](auto& s) { s.b_per_us = -1; }, "b_per_us"},
      {[](auto& s) { s.b_per_us = std::nan(""); }, "b_per_us"},
  };
  for (const auto& c : bad) {
    PolicyConfig config;
    c.set(config.orloj.score);
    auto policy = MakePolicy("orloj", p, config);
    ASSERT_FALSE(policy.ok()) << c.want;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(policy.status().message()), ::testing::HasSubstr(c.want));
  }
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
