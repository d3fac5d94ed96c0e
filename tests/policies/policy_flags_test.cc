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
ABSL_DECLARE_FLAG(int32_t, buckets);
ABSL_DECLARE_FLAG(bool, drop_below_first_bucket);
ABSL_DECLARE_FLAG(bool, follow_drift);
ABSL_DECLARE_FLAG(std::string, bucket_ties);
ABSL_DECLARE_FLAG(double, fit_margin);
ABSL_DECLARE_FLAG(double, guard_headroom);
ABSL_DECLARE_FLAG(bool, guard_upgrades_only);
ABSL_DECLARE_FLAG(double, guard_window_ms);
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
  const SlackFitOptions& s = got.slackfit;
  const SlackFitOptions& d = def.slackfit;
  EXPECT_EQ(s.num_buckets, d.num_buckets);
  EXPECT_EQ(s.partial_most_accurate, d.partial_most_accurate);
  EXPECT_EQ(s.drop_below_first_bucket, d.drop_below_first_bucket);
  EXPECT_EQ(s.bucket_ties, d.bucket_ties);
  EXPECT_EQ(s.rate_guard, d.rate_guard);
  EXPECT_EQ(s.guard_headroom, d.guard_headroom);
  EXPECT_EQ(s.guard_upgrades_only, d.guard_upgrades_only);
  EXPECT_EQ(s.rate_window, d.rate_window);
  EXPECT_EQ(s.guard_unmeasured_margin, d.guard_unmeasured_margin);
  EXPECT_EQ(s.fit_margin, d.fit_margin);
  const ProfiledPolicyOptions& b = s.base;
  const ProfiledPolicyOptions& db = d.base;
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
// policies/policy_flags.h, README.md and docs/engine.md.
TEST(PolicyFlagsTest, TheDefaultsAreTheLiveOnes) {
  const PolicyConfig c;
  EXPECT_EQ(c.slackfit.num_buckets, 8);
  EXPECT_FALSE(c.slackfit.drop_below_first_bucket);
  EXPECT_TRUE(c.slackfit.base.latency.unmeasured_follow_drift);
  EXPECT_EQ(c.slackfit.bucket_ties, LatencyBuckets::Ties::kThroughput);
  EXPECT_EQ(c.slackfit.base.overhead_quantile, 0.5);
  EXPECT_EQ(c.slackfit.base.initial_overhead, Micros(500));
  EXPECT_EQ(c.fixed_subnet_id, -1);
  EXPECT_EQ(c.ratefit_pace, 1.0);
  EXPECT_EQ(c.ratefit_capacity_quantile, 0.99);
}

TEST(PolicyFlagsTest, EveryFlagReachesTheConfig) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_policy, "slackfit-rg");
  absl::SetFlag(&FLAGS_fixed_subnet, 3);
  absl::SetFlag(&FLAGS_ratefit_pace, 0.5);
  absl::SetFlag(&FLAGS_ratefit_capacity_quantile, 0.75);
  absl::SetFlag(&FLAGS_buckets, 12);
  absl::SetFlag(&FLAGS_drop_below_first_bucket, true);
  absl::SetFlag(&FLAGS_follow_drift, false);
  absl::SetFlag(&FLAGS_bucket_ties, "accuracy");
  absl::SetFlag(&FLAGS_fit_margin, 0.05);
  absl::SetFlag(&FLAGS_guard_headroom, 1.2);
  absl::SetFlag(&FLAGS_guard_upgrades_only, false);
  absl::SetFlag(&FLAGS_guard_window_ms, 250);
  absl::SetFlag(&FLAGS_overhead_quantile, 0.9);
  absl::SetFlag(&FLAGS_initial_overhead_us, 1500);
  absl::StatusOr<PolicySpec> spec = PolicySpecFromFlags();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "slackfit-rg");
  const PolicyConfig& c = spec->config;
  EXPECT_EQ(c.fixed_subnet_id, 3);
  EXPECT_EQ(c.ratefit_pace, 0.5);
  EXPECT_EQ(c.ratefit_capacity_quantile, 0.75);
  EXPECT_EQ(c.slackfit.num_buckets, 12);
  EXPECT_TRUE(c.slackfit.drop_below_first_bucket);
  EXPECT_FALSE(c.slackfit.base.latency.unmeasured_follow_drift);
  EXPECT_EQ(c.slackfit.bucket_ties, LatencyBuckets::Ties::kAccuracy);
  EXPECT_EQ(c.slackfit.fit_margin, 0.05);
  EXPECT_EQ(c.slackfit.guard_headroom, 1.2);
  EXPECT_FALSE(c.slackfit.guard_upgrades_only);
  EXPECT_EQ(c.slackfit.rate_window, Millis(250));
  EXPECT_EQ(c.slackfit.base.overhead_quantile, 0.9);
  EXPECT_EQ(c.slackfit.base.initial_overhead, Micros(1500));
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
      {"--guard_headroom", [] { absl::SetFlag(&FLAGS_guard_headroom, 0); }},
      {"--guard_window_ms", [] { absl::SetFlag(&FLAGS_guard_window_ms, 0); }},
      {"--initial_overhead_us", [] { absl::SetFlag(&FLAGS_initial_overhead_us, -1); }},
      {"--ratefit_pace", [] { absl::SetFlag(&FLAGS_ratefit_pace, -0.5); }},
      {"--ratefit_capacity_quantile", [] { absl::SetFlag(&FLAGS_ratefit_capacity_quantile, 0); }},
      {"--ratefit_capacity_quantile", [] { absl::SetFlag(&FLAGS_ratefit_capacity_quantile, 1.5); }},
      // The slack is divided by 1 + margin: NaN reached a Nanos cast.
      {"--fit_margin", [] { absl::SetFlag(&FLAGS_fit_margin, std::nan("")); }},
      {"--fit_margin",
       [] { absl::SetFlag(&FLAGS_fit_margin, std::numeric_limits<double>::infinity()); }},
      // Past a day (or a factor of 1000) the times overflow nanoseconds.
      {"--guard_window_ms", [] { absl::SetFlag(&FLAGS_guard_window_ms, 1e300); }},
      {"--initial_overhead_us",
       [] { absl::SetFlag(&FLAGS_initial_overhead_us, std::numeric_limits<double>::infinity()); }},
      {"--ratefit_pace",
       [] { absl::SetFlag(&FLAGS_ratefit_pace, std::numeric_limits<double>::infinity()); }},
      {"--guard_headroom", [] { absl::SetFlag(&FLAGS_guard_headroom, std::nan("")); }},
      {"--guard_headroom", [] { absl::SetFlag(&FLAGS_guard_headroom, 1e9); }},
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
  absl::SetFlag(&FLAGS_fit_margin, -1);  // the policy's default
  EXPECT_TRUE(PolicySpecFromFlags().ok());
}

}  // namespace
}  // namespace superserve
