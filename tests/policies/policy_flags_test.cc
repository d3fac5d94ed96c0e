#include "policies/policy_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"

ABSL_DECLARE_FLAG(std::string, policy);
ABSL_DECLARE_FLAG(int32_t, fixed_subnet);
ABSL_DECLARE_FLAG(double, ratefit_pace);
ABSL_DECLARE_FLAG(double, ratefit_capacity_quantile);
ABSL_DECLARE_FLAG(double, ratefit_window_ms);
ABSL_DECLARE_FLAG(int32_t, buckets);
ABSL_DECLARE_FLAG(bool, drop_below_first_bucket);
ABSL_DECLARE_FLAG(bool, follow_drift);
ABSL_DECLARE_FLAG(std::string, bucket_ties);
ABSL_DECLARE_FLAG(double, overhead_quantile);
ABSL_DECLARE_FLAG(double, initial_overhead_us);

namespace superserve {
namespace {

// The flags' defaults are the option structs' defaults, every field.
TEST(PolicyFlagsTest, DefaultsAreTheDefaultConstructedConfig) {
  absl::FlagSaver saver;
  absl::StatusOr<PolicySpec> spec = PolicySpecFromFlags();
  ASSERT_TRUE(spec.ok()) << spec.status();
  const PolicySpec want;
  EXPECT_EQ(spec->name, "ratefit");
  EXPECT_EQ(spec->name, want.name);
  const PolicyConfig& got = spec->config;
  const PolicyConfig& def = want.config;
  EXPECT_EQ(got.fixed_subnet_id, def.fixed_subnet_id);
  EXPECT_EQ(got.ratefit_pace, def.ratefit_pace);
  EXPECT_EQ(got.ratefit_capacity_quantile, def.ratefit_capacity_quantile);
  EXPECT_EQ(got.ratefit_rate_window, def.ratefit_rate_window);
  EXPECT_EQ(got.baselines.slackfit_buckets, def.baselines.slackfit_buckets);
  EXPECT_EQ(got.baselines.slackfit_drop_below_first_bucket,
            def.baselines.slackfit_drop_below_first_bucket);
  EXPECT_EQ(got.baselines.slackfit_ties_to_accuracy, def.baselines.slackfit_ties_to_accuracy);
  const ProfiledPolicyOptions& b = got.base;
  const ProfiledPolicyOptions& db = def.base;
  EXPECT_EQ(b.initial_overhead, db.initial_overhead);
  EXPECT_EQ(b.overhead_window, db.overhead_window);
  EXPECT_EQ(b.overhead_quantile, db.overhead_quantile);
  EXPECT_EQ(b.telemetry_expiry, db.telemetry_expiry);
  EXPECT_EQ(b.latency.window, db.latency.window);
  EXPECT_EQ(b.latency.quantile, db.latency.quantile);
  EXPECT_EQ(b.latency.min_samples, db.latency.min_samples);
  EXPECT_EQ(b.latency.min_relative_change, db.latency.min_relative_change);
  EXPECT_EQ(b.latency.unmeasured_margin, db.latency.unmeasured_margin);
  EXPECT_EQ(b.latency.unmeasured_follow_drift, db.latency.unmeasured_follow_drift);
  // And whatever a later field adds, as far as the JSON names it.
  EXPECT_EQ(PolicySpecJson(*spec), PolicySpecJson(want));
}

// The one set of defaults (the live router's): documented in
// policies/policy_flags.h and README.md.
TEST(PolicyFlagsTest, TheDefaultsAreTheLiveOnes) {
  const PolicyConfig c;
  EXPECT_EQ(c.baselines.slackfit_buckets, 8);
  EXPECT_FALSE(c.baselines.slackfit_drop_below_first_bucket);
  EXPECT_FALSE(c.baselines.slackfit_ties_to_accuracy);
  EXPECT_TRUE(c.base.latency.unmeasured_follow_drift);
  EXPECT_EQ(c.base.overhead_quantile, 0.5);
  EXPECT_EQ(c.base.initial_overhead, Micros(500));
  EXPECT_EQ(c.fixed_subnet_id, -1);
  EXPECT_EQ(c.ratefit_pace, 1.0);
  EXPECT_EQ(c.ratefit_capacity_quantile, 0.99);
  EXPECT_EQ(c.ratefit_rate_window, Millis(100));
}

TEST(PolicyFlagsTest, EveryFlagReachesTheConfig) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_policy, "fixed-subnet");
  absl::SetFlag(&FLAGS_fixed_subnet, 3);
  absl::SetFlag(&FLAGS_ratefit_pace, 0.5);
  absl::SetFlag(&FLAGS_ratefit_capacity_quantile, 0.75);
  absl::SetFlag(&FLAGS_ratefit_window_ms, 250);
  absl::SetFlag(&FLAGS_buckets, 12);
  absl::SetFlag(&FLAGS_drop_below_first_bucket, true);
  absl::SetFlag(&FLAGS_follow_drift, false);
  absl::SetFlag(&FLAGS_bucket_ties, "accuracy");
  absl::SetFlag(&FLAGS_overhead_quantile, 0.9);
  absl::SetFlag(&FLAGS_initial_overhead_us, 1500);
  absl::StatusOr<PolicySpec> spec = PolicySpecFromFlags();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "fixed-subnet");
  const PolicyConfig& c = spec->config;
  EXPECT_EQ(c.fixed_subnet_id, 3);
  EXPECT_EQ(c.ratefit_pace, 0.5);
  EXPECT_EQ(c.ratefit_capacity_quantile, 0.75);
  EXPECT_EQ(c.ratefit_rate_window, Millis(250));
  EXPECT_EQ(c.baselines.slackfit_buckets, 12);
  EXPECT_TRUE(c.baselines.slackfit_drop_below_first_bucket);
  EXPECT_TRUE(c.baselines.slackfit_ties_to_accuracy);
  EXPECT_FALSE(c.base.latency.unmeasured_follow_drift);
  EXPECT_EQ(c.base.overhead_quantile, 0.9);
  EXPECT_EQ(c.base.initial_overhead, Micros(1500));
}

// The flags of the removed policies (slackfit-rg's guard, its fit margin)
// are gone; a baseline is no --policy until bench/baselines registers it.
TEST(PolicyFlagsTest, OnlyTheProductWithoutTheBaselinesRegistered) {
  for (const char* gone : {"guard_headroom", "guard_upgrades_only", "guard_window_ms", "fit_margin",
                           "orloj_anchor_at_head"}) {
    EXPECT_EQ(absl::FindCommandLineFlag(gone), nullptr) << gone;
  }
  for (const char* name : {"ratefit", "symphony", "fixed-subnet", "orloj"}) {
    absl::FlagSaver saver;
    absl::SetFlag(&FLAGS_policy, name);
    EXPECT_TRUE(PolicySpecFromFlags().ok()) << name;
  }
  for (const char* name : {"slackfit", "slackfit-rg", "shadowfit"}) {
    absl::FlagSaver saver;
    absl::SetFlag(&FLAGS_policy, name);
    EXPECT_FALSE(PolicySpecFromFlags().ok()) << name;
  }
}

// Each bad value is an InvalidArgument error that names its flag.
TEST(PolicyFlagsTest, BadValuesAreErrorsNamingTheFlag) {
  struct Case {
    std::string flag;
    std::function<void()> set;
  };
  const std::vector<Case> cases = {
      {"--policy", [] { absl::SetFlag(&FLAGS_policy, "nope"); }},
      {"--buckets", [] { absl::SetFlag(&FLAGS_buckets, 0); }},
      {"--buckets", [] { absl::SetFlag(&FLAGS_buckets, -3); }},
      {"--bucket_ties", [] { absl::SetFlag(&FLAGS_bucket_ties, "latency"); }},
      {"--overhead_quantile", [] { absl::SetFlag(&FLAGS_overhead_quantile, 1.5); }},
      {"--overhead_quantile", [] { absl::SetFlag(&FLAGS_overhead_quantile, -0.1); }},
      {"--ratefit_window_ms", [] { absl::SetFlag(&FLAGS_ratefit_window_ms, 0); }},
      {"--ratefit_window_ms", [] { absl::SetFlag(&FLAGS_ratefit_window_ms, std::nan("")); }},
      {"--initial_overhead_us", [] { absl::SetFlag(&FLAGS_initial_overhead_us, -1); }},
      {"--ratefit_pace", [] { absl::SetFlag(&FLAGS_ratefit_pace, -0.5); }},
      {"--ratefit_capacity_quantile", [] { absl::SetFlag(&FLAGS_ratefit_capacity_quantile, 0); }},
      {"--ratefit_capacity_quantile", [] { absl::SetFlag(&FLAGS_ratefit_capacity_quantile, 1.5); }},
      // Past a day (or a factor of 1000) the times overflow nanoseconds.
      {"--ratefit_window_ms", [] { absl::SetFlag(&FLAGS_ratefit_window_ms, 1e300); }},
      {"--initial_overhead_us",
       [] { absl::SetFlag(&FLAGS_initial_overhead_us, std::numeric_limits<double>::infinity()); }},
      {"--ratefit_pace",
       [] { absl::SetFlag(&FLAGS_ratefit_pace, std::numeric_limits<double>::infinity()); }},
  };
  for (const Case& c : cases) {
    absl::FlagSaver saver;
    c.set();
    absl::StatusOr<PolicySpec> spec = PolicySpecFromFlags();
    ASSERT_FALSE(spec.ok()) << c.flag;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_THAT(std::string(spec.status().message()), ::testing::HasSubstr(c.flag + " "))
        << spec.status();
  }
  // The boundaries are fine.
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_buckets, 1);
  absl::SetFlag(&FLAGS_overhead_quantile, 1.0);
  absl::SetFlag(&FLAGS_initial_overhead_us, 0);
  EXPECT_TRUE(PolicySpecFromFlags().ok());
}

}  // namespace
}  // namespace superserve
