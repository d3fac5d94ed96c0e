#include "policies/policy_factory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/json_writer.h"
#include "policies/greedy_policies.h"
#include "policies/symphony_policy.h"
#include "policies/ratefit_policy.h"
#include "policies/shadowfit_policy.h"
#include "policies/slo_first_policy.h"

namespace superserve {
namespace {

const std::vector<std::string>& BuiltinNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>{
      "ratefit", "slo-first", "slackfit", "slackfit-ma", "slackfit-rg", "maxbatch", "maxacc", "clipper+",
      "infaas", "symphony", "shadowfit"};
  return *names;
}

struct Registry {
  absl::Mutex mu;
  std::map<std::string, PolicyMaker> extra ABSL_GUARDED_BY(mu);
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

absl::StatusOr<std::unique_ptr<Policy>> MakeBuiltin(const std::string& name,
                                                    const ModelProfile& profile,
                                                    const PolicyConfig& config) {
  const ProfiledPolicyOptions& base = config.slackfit.base;
  if (name == "slackfit" || name == "slackfit-rg" || name == "slackfit-ma") {
    SlackFitOptions o = config.slackfit;
    o.rate_guard = name == "slackfit-rg";
    // slackfit-ma: DESIGN.md's most-accurate partial batches (ablation);
    // slackfit-rg uses them too: its guard vets every choice.
    o.partial_most_accurate = name != "slackfit";
    if (o.num_buckets < 1) return absl::InvalidArgumentError("--buckets must be >= 1");
    return std::make_unique<SlackFitPolicy>(profile, o);
  }
  if (name == "ratefit") {
    RateFitOptions o;
    o.base = base;
    o.rate_window = config.slackfit.rate_window;
    o.pace = config.ratefit_pace;
    o.capacity_quantile = config.ratefit_capacity_quantile;
    return std::make_unique<RateFitPolicy>(profile, o);
  }
  if (name == "slo-first") {
    SloFirstOptions o;
    o.base = base;
    return std::make_unique<SloFirstPolicy>(profile, o);
  }
  if (name == "shadowfit") {
    ShadowFitOptions o;
    o.ratefit.base = base;
    o.ratefit.rate_window = config.slackfit.rate_window;
    o.ratefit.pace = config.ratefit_pace;
    o.ratefit.capacity_quantile = config.ratefit_capacity_quantile;
    return std::make_unique<ShadowFitPolicy>(profile, o);
  }
  if (name == "maxbatch") return std::make_unique<MaxBatchPolicy>(profile, base);
  if (name == "symphony") {
    SymphonyOptions o;
    o.base = base;
    return std::make_unique<SymphonyPolicy>(profile, o);
  }
  if (name == "maxacc") return std::make_unique<MaxAccPolicy>(profile, base);
  if (name == "infaas") {
    int least = 0;
    for (int i = 1; i < static_cast<int>(profile.subnets.size()); ++i) {
      if (profile.subnets[i].accuracy < profile.subnets[least].accuracy) least = i;
    }
    return std::make_unique<FixedSubnetPolicy>("infaas", profile, least, base);
  }
  if (name == "clipper+" || name == "clipper") {
    int index = -1;
    if (config.fixed_subnet_id == -1) {  // the most accurate subnet
      index = 0;
      for (int i = 1; i < static_cast<int>(profile.subnets.size()); ++i) {
        if (profile.subnets[i].accuracy > profile.subnets[index].accuracy) index = i;
      }
    } else {
      index = profile.SubnetIndex(config.fixed_subnet_id);
    }
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policy clipper+ needs --fixed_subnet set to a subnet id of profile \"", profile.model,
          "\" (or -1, the most accurate); got ", config.fixed_subnet_id));
    }
    return std::make_unique<FixedSubnetPolicy>(
        absl::StrCat("clipper+(", profile.subnets[index].accuracy, ")"), profile, index, base);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown policy \"", name, "\"; known: ",
                                                 absl::StrJoin(PolicyNames(), ", ")));
}

}  // namespace

const char* BucketTiesName(LatencyBuckets::Ties ties) {
  return ties == LatencyBuckets::Ties::kAccuracy ? "accuracy" : "throughput";
}

std::string PolicySpecJson(const PolicySpec& spec) {
  const PolicyConfig& c = spec.config;
  const SlackFitOptions& s = c.slackfit;
  const ProfiledPolicyOptions& b = s.base;
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
  JsonWriter slackfit;
  slackfit.Add("base", base)
      .Add("num_buckets", s.num_buckets)
      .Add("partial_most_accurate", s.partial_most_accurate)
      .Add("drop_below_first_bucket", s.drop_below_first_bucket)
      .Add("bucket_ties", BucketTiesName(s.bucket_ties))
      .Add("rate_guard", s.rate_guard)
      .Add("guard_headroom", s.guard_headroom)
      .Add("guard_upgrades_only", s.guard_upgrades_only)
      .Add("rate_window_ns", static_cast<int64_t>(s.rate_window))
      .Add("guard_unmeasured_margin", s.guard_unmeasured_margin)
      .Add("fit_margin", s.fit_margin);
  JsonWriter config;
  config.Add("slackfit", slackfit)
      .Add("fixed_subnet_id", c.fixed_subnet_id)
      .Add("ratefit_pace", c.ratefit_pace)
      .Add("ratefit_capacity_quantile", c.ratefit_capacity_quantile);
  return JsonWriter().Add("policy", spec.name).Add("config", config).ToString();
}

std::vector<std::string> DynamicPolicyNames() { return {"orloj", "clockwork", "nexus"}; }

void RegisterPolicy(const std::string& name, PolicyMaker maker) {
  Registry& r = GlobalRegistry();
  absl::MutexLock lock(&r.mu);
  r.extra[name] = std::move(maker);
}

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names = BuiltinNames();
  Registry& r = GlobalRegistry();
  absl::MutexLock lock(&r.mu);
  for (const auto& [name, maker] : r.extra) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                                   const ModelProfile& profile,
                                                   const PolicyConfig& config) {
  PolicyMaker extra;
  {
    Registry& r = GlobalRegistry();
    absl::MutexLock lock(&r.mu);
    if (auto it = r.extra.find(name); it != r.extra.end()) extra = it->second;
  }
  if (extra) return extra(profile, config);  // outside the lock: it may call MakePolicy
  if (name == "orloj" || name == "clockwork" || name == "nexus") {
    if (!profile.is_dynamic) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policy ", name, " schedules dynamic models; profile \"", profile.model,
          "\" has no dynamic block with application histograms"));
    }
    if (name == "orloj") {
      // Checked here, where every caller's configuration passes (the flags
      // that set them are superserve-sim's: --orloj_*).
      const OrlojScoreTable::Params& p = config.orloj.score;
      if (p.grid_bins < 1 || p.grid_bins > OrlojScoreTable::kMaxGridBins) {
        return absl::InvalidArgumentError(absl::StrCat("orloj: grid_bins must be in [1, ",
                                                       OrlojScoreTable::kMaxGridBins, "]; got ",
                                                       p.grid_bins));
      }
      if (!(p.viable_quantile > 0 && p.viable_quantile <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("orloj: viable_quantile must be in (0, 1]; got ", p.viable_quantile));
      }
      if (!(p.b_per_us > 0) || !std::isfinite(p.b_per_us)) {
        return absl::InvalidArgumentError(
            absl::StrCat("orloj: b_per_us must be finite and > 0; got ", p.b_per_us));
      }
      return std::make_unique<OrlojPolicy>(profile, config.orloj);
    }
    if (name == "clockwork") return std::make_unique<ClockworkLikePolicy>(profile, config.clockwork);
    return std::make_unique<NexusLikePolicy>(profile, config.nexus);
  }
  if (profile.subnets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile \"", profile.model, "\" has no subnets to schedule"));
  }
  return MakeBuiltin(name, profile, config);
}

}  // namespace superserve
