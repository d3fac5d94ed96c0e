#include "policies/policy_factory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "policies/fixed_subnet_policy.h"
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
  auto bad = MakePolicy("fixed-subnet", p, c);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("--fixed_subnet"));
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("got 7"));
  EXPECT_FALSE(MakePolicy("ratefit", ModelProfile(), PolicyConfig()).ok()) << "no subnets";
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
       "b_per_us must be finite and >= 0; got inf"},
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

// policies/ ships the product only; the paper baselines (slackfit, ...)
// exist once bench/baselines registers them (tests/bench/baselines).
TEST(PolicyFactoryTest, KnowsTheProductPoliciesAndRejectsUnknownNames) {
  auto names = PolicyNames();
  EXPECT_THAT(names, ::testing::IsSupersetOf({"ratefit", "symphony", "fixed-subnet"}));
  EXPECT_EQ(names.front(), PolicySpec().name) << "the default first";
  EXPECT_THAT(DynamicPolicyNames(), ::testing::Contains("orloj"));
  for (const char* baseline : {"slackfit", "maxbatch", "maxacc", "infaas", "clipper+"}) {
    EXPECT_THAT(names, ::testing::Not(::testing::Contains(baseline)));
  }
  auto unknown = MakePolicy("nope", ThreeSubnetProfile(), {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), ::testing::HasSubstr("fixed-subnet"))
      << "the error lists the known names";
  EXPECT_THAT(std::string(unknown.status().message()), ::testing::HasSubstr("orloj"));
}

TEST(PolicyFactoryTest, FixedSubnetWithoutASubnetServesTheMostAccurate) {
  auto p = MakePolicy("fixed-subnet", ThreeSubnetProfile(), PolicyConfig());  // id -1
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->name(), "fixed-subnet(80)");
  EXPECT_TRUE((*p)->MayRun(2));
  EXPECT_FALSE((*p)->MayRun(0));
  PolicyConfig c;
  c.fixed_subnet_id = 100;
  p = MakePolicy("fixed-subnet", ThreeSubnetProfile(), c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->name(), "fixed-subnet(70)");
}

TEST(PolicyFactoryTest, RegisteredPoliciesAreMadeAndListed) {
  int calls = 0;
  RegisterPolicy("test-least-accurate",
                 [&calls](const ModelProfile& profile, const PolicyConfig& config)
                     -> absl::StatusOr<std::unique_ptr<Policy>> {
                   ++calls;
                   EXPECT_EQ(config.baselines.slackfit_buckets, 5);
                   return std::make_unique<FixedSubnetPolicy>("test-least-accurate", profile, 0,
                                                              config.base);
                 });
  auto names = PolicyNames();
  EXPECT_THAT(names, ::testing::Contains("test-least-accurate"));
  EXPECT_THAT(names, ::testing::Contains("ratefit"));
  PolicyConfig c;
  c.baselines.slackfit_buckets = 5;
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

TEST(PolicySpecJsonTest, NamesEveryOptionOfEveryPolicy) {
  PolicySpec spec;
  spec.config.baselines.slackfit_ties_to_accuracy = true;
  spec.config.symphony.frontrun_margin = 0.05;
  spec.config.orloj.every_batch_size = true;
  spec.config.fixed_subnet_id = 3;
  const std::string json = PolicySpecJson(spec);
  for (const char* field :
       {"\"policy\":\"ratefit\"",
        // every profile-driven policy
        "\"initial_overhead_ns\":500000", "\"overhead_quantile\":0.5",
        "\"unmeasured_follow_drift\":true", "\"drift_min_tuples\":2", "\"startup_drift\":true",
        "\"telemetry_expiry_ns\"", "\"min_samples\":16",
        // ratefit
        "\"ratefit\":{", "\"pace\":1", "\"capacity_quantile\":0.99", "\"rate_window_ns\":100000000",
        "\"batch_budget\":0.7", "\"peak_band\":0.05", "\"fit_margin\":0.05",
        // symphony, fixed-subnet, orloj
        "\"symphony\":{\"window_drop\":true", "\"frontrun_margin\":0.05",
        "\"rate_window_ns\":250000000", "\"fixed-subnet\":{\"subnet_id\":3}", "\"orloj\":{",
        "\"every_batch_size\":true", "\"grid_bins\":48", "\"viable_quantile\":0.5",
        // the baselines' options the flags set
        "\"slackfit\":{\"num_buckets\":8", "\"drop_below_first_bucket\":false",
        "\"bucket_ties\":\"accuracy\""}) {
    EXPECT_THAT(json, ::testing::HasSubstr(field));
  }
  for (const char* removed : {"guard_headroom", "guard_upgrades_only", "rate_guard",
                              "partial_most_accurate", "anchor_at_head", "timeout"}) {
    EXPECT_THAT(json, ::testing::Not(::testing::HasSubstr(removed)));
  }
  EXPECT_EQ(json.find('\n'), std::string::npos) << "one line";
}

}  // namespace
}  // namespace superserve
