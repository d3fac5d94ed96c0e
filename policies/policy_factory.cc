#include "policies/policy_factory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/json_writer.h"
#include "policies/fixed_subnet_policy.h"
#include "policies/slo_first_policy.h"

namespace superserve {
namespace {

const std::vector<std::string>& ProductNames() {
  static const std::vector<std::string>* names =
      new std::vector<std::string>{"ratefit", "slo-first", "symphony", "fixed-subnet"};
  return *names;
}

struct Registered {
  PolicyMaker maker;
  bool dynamic = false;
};

struct Registry {
  absl::Mutex mu;
  std::map<std::string, Registered> extra ABSL_GUARDED_BY(mu);
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

absl::Status NeedsDynamicProfile(const std::string& name, const ModelProfile& profile) {
  if (profile.is_dynamic) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("policy ", name, " schedules dynamic models; profile \"", profile.model,
                   "\" has no dynamic block with application histograms"));
}

absl::StatusOr<std::unique_ptr<Policy>> MakeOrloj(const ModelProfile& profile,
                                                  const PolicyConfig& config) {
  // Checked here, where every caller's configuration passes (the flags that
  // set them are superserve-sim's: --orloj_*).
  const OrlojScoreTable::Params& p = config.orloj.score;
  if (p.grid_bins < 1 || p.grid_bins > OrlojScoreTable::kMaxGridBins) {
    return absl::InvalidArgumentError(absl::StrCat(
        "orloj: grid_bins must be in [1, ", OrlojScoreTable::kMaxGridBins, "]; got ", p.grid_bins));
  }
  if (!(p.viable_quantile > 0 && p.viable_quantile <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("orloj: viable_quantile must be in (0, 1]; got ", p.viable_quantile));
  }
  if (!(p.b_per_us >= 0) || !std::isfinite(p.b_per_us)) {
    return absl::InvalidArgumentError(
        absl::StrCat("orloj: b_per_us must be finite and >= 0; got ", p.b_per_us));
  }
  return std::make_unique<OrlojPolicy>(profile, config.orloj);
}

absl::StatusOr<std::unique_ptr<Policy>> MakeProduct(const std::string& name,
                                                    const ModelProfile& profile,
                                                    const PolicyConfig& config) {
  if (name == "ratefit") {
    return std::make_unique<RateFitPolicy>(profile, RateFitOptionsFor(config));
  }
  if (name == "slo-first") {
    return std::make_unique<SloFirstPolicy>(profile, SloFirstOptionsFor(config));
  }
  if (name == "symphony") {
    return std::make_unique<SymphonyPolicy>(profile, SymphonyOptionsFor(config));
  }
  if (name == "fixed-subnet") {
    const int index = FixedSubnetIndex(profile, config.fixed_subnet_id);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policy fixed-subnet needs --fixed_subnet set to a subnet id of profile \"",
          profile.model, "\" (or -1, the most accurate); got ", config.fixed_subnet_id));
    }
    return std::make_unique<FixedSubnetPolicy>(
        absl::StrCat("fixed-subnet(", profile.subnets[index].accuracy, ")"), profile, index,
        config.base);
  }
  std::vector<std::string> known = PolicyNames();
  for (const std::string& n : DynamicPolicyNames()) known.push_back(n);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown policy \"", name, "\"; known: ", absl::StrJoin(known, ", ")));
}

JsonWriter ProfiledJson(const ProfiledPolicyOptions& b) {
  const LatencyTable::Options& l = b.latency;
  JsonWriter latency;
  latency.Add("window", static_cast<int64_t>(l.window))
      .Add("quantile", l.quantile)
      .Add("min_samples", static_cast<int64_t>(l.min_samples))
      .Add("min_relative_change", l.min_relative_change)
      .Add("unmeasured_margin", l.unmeasured_margin)
      .Add("unmeasured_follow_drift", l.unmeasured_follow_drift)
      .Add("drift_min_tuples", static_cast<int64_t>(l.drift_min_tuples))
      .Add("drift_min_samples", static_cast<int64_t>(l.drift_min_samples))
      .Add("startup_drift", l.startup_drift)
      .Add("drift_deadband", l.drift_deadband);
  JsonWriter base;
  base.Add("latency", latency)
      .Add("initial_overhead_ns", static_cast<int64_t>(b.initial_overhead))
      .Add("overhead_window", static_cast<int64_t>(b.overhead_window))
      .Add("overhead_quantile", b.overhead_quantile)
      .Add("telemetry_expiry_ns", static_cast<int64_t>(b.telemetry_expiry));
  return base;
}

}  // namespace

RateFitOptions RateFitOptionsFor(const PolicyConfig& config) {
  RateFitOptions o;
  o.base = config.base;
  o.rate_window = config.ratefit_rate_window;
  o.pace = config.ratefit_pace;
  o.capacity_quantile = config.ratefit_capacity_quantile;
  return o;
}

SymphonyOptions SymphonyOptionsFor(const PolicyConfig& config) {
  SymphonyOptions o = config.symphony;
  o.base = config.base;
  return o;
}

SloFirstOptions SloFirstOptionsFor(const PolicyConfig& config) {
  SloFirstOptions o = config.slo_first;
  o.base = config.base;
  return o;
}

std::string PolicySpecJson(const PolicySpec& spec) {
  const PolicyConfig& c = spec.config;
  const RateFitOptions r = RateFitOptionsFor(c);
  JsonWriter ratefit;
  ratefit.Add("rate_window_ns", static_cast<int64_t>(r.rate_window))
      .Add("drop_rate_window_ns", static_cast<int64_t>(r.drop_rate_window))
      .Add("batch_budget", r.batch_budget)
      .Add("headroom", r.headroom)
      .Add("peak_band", r.peak_band)
      .Add("burst_horizon_ns", static_cast<int64_t>(r.burst_horizon))
      .Add("backlog_factor", r.backlog_factor)
      .Add("fit_margin", r.fit_margin)
      .Add("pace", r.pace)
      .Add("one_subnet_staggered_budget", r.one_subnet_staggered_budget)
      .Add("capacity_quantile", r.capacity_quantile);
  const SymphonyOptions s = SymphonyOptionsFor(c);
  JsonWriter symphony;
  symphony.Add("window_drop", s.window_drop)
      .Add("window_fraction", s.window_fraction)
      .Add("frontrun_margin", s.frontrun_margin)
      .Add("rate_window_ns", static_cast<int64_t>(s.rate_window));
  const SloFirstOptions f = SloFirstOptionsFor(c);
  JsonWriter slo_first;
  slo_first.Add("headroom", f.headroom)
      .Add("rate_window_slos", f.rate_window_slos)
      .Add("defer", f.defer);
  JsonWriter fixed;
  fixed.Add("subnet_id", c.fixed_subnet_id);
  const OrlojOptions& o = c.orloj;
  JsonWriter estimator;
  estimator.Add("window", static_cast<int64_t>(o.base.estimator.window))
      .Add("min_samples", static_cast<int64_t>(o.base.estimator.min_samples))
      .Add("bins", o.base.estimator.bins)
      .Add("share_window", static_cast<int64_t>(o.base.estimator.share_window));
  JsonWriter score;
  score.Add("b_per_us", o.score.b_per_us)
      .Add("cost", o.score.cost)
      .Add("grid_bins", o.score.grid_bins)
      .Add("viable_quantile", o.score.viable_quantile);
  JsonWriter orloj;
  orloj.Add("estimator", estimator)
      .Add("refresh_interval_ns", static_cast<int64_t>(o.base.refresh_interval))
      .Add("initial_overhead_ns", static_cast<int64_t>(o.base.initial_overhead))
      .Add("score", score)
      .Add("max_exponent", o.max_exponent)
      .Add("every_batch_size", o.every_batch_size);
  const BaselineOptions& b = c.baselines;
  JsonWriter slackfit;
  slackfit.Add("num_buckets", b.slackfit_buckets)
      .Add("drop_below_first_bucket", b.slackfit_drop_below_first_bucket)
      .Add("bucket_ties", b.slackfit_ties_to_accuracy ? "accuracy" : "throughput");
  JsonWriter config;
  config.Add("base", ProfiledJson(c.base))
      .Add("ratefit", ratefit)
      .Add("slo-first", slo_first)
      .Add("symphony", symphony)
      .Add("fixed-subnet", fixed)
      .Add("orloj", orloj)
      .Add("slackfit", slackfit);
  return JsonWriter().Add("policy", spec.name).Add("config", config).ToString();
}

void RegisterPolicy(const std::string& name, PolicyMaker maker, bool dynamic) {
  Registry& r = GlobalRegistry();
  absl::MutexLock lock(&r.mu);
  r.extra[name] = Registered{std::move(maker), dynamic};
}

namespace {

std::vector<std::string> NamesOf(std::vector<std::string> names, bool dynamic) {
  Registry& r = GlobalRegistry();
  absl::MutexLock lock(&r.mu);
  for (const auto& [name, entry] : r.extra) {
    if (entry.dynamic != dynamic) continue;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

}  // namespace

std::vector<std::string> PolicyNames() { return NamesOf(ProductNames(), /*dynamic=*/false); }

std::vector<std::string> DynamicPolicyNames() { return NamesOf({"orloj"}, /*dynamic=*/true); }

absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                                   const ModelProfile& profile,
                                                   const PolicyConfig& config) {
  Registered extra;
  {
    Registry& r = GlobalRegistry();
    absl::MutexLock lock(&r.mu);
    if (auto it = r.extra.find(name); it != r.extra.end()) extra = it->second;
  }
  if (extra.maker) {  // called outside the lock: it may call MakePolicy
    if (extra.dynamic) {
      if (absl::Status s = NeedsDynamicProfile(name, profile); !s.ok()) return s;
    } else if (profile.subnets.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile \"", profile.model, "\" has no subnets to schedule"));
    }
    return extra.maker(profile, config);
  }
  if (name == "orloj") {
    if (absl::Status s = NeedsDynamicProfile(name, profile); !s.ok()) return s;
    return MakeOrloj(profile, config);
  }
  if (profile.subnets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile \"", profile.model, "\" has no subnets to schedule"));
  }
  return MakeProduct(name, profile, config);
}

}  // namespace superserve
