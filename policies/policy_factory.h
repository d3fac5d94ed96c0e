#ifndef SUPERSERVE_POLICIES_POLICY_FACTORY_H_
#define SUPERSERVE_POLICIES_POLICY_FACTORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "policies/orloj_policy.h"
#include "policies/policy.h"
#include "policies/profiled_policy.h"
#include "policies/ratefit_policy.h"
#include "policies/slo_first_policy.h"
#include "policies/symphony_policy.h"

namespace superserve {

// The options of the paper baselines (bench/baselines) that the policy flags
// set; the product policies ignore them.
struct BaselineOptions {
  // slackfit: the number of latency buckets K (>= 1).
  int32_t slackfit_buckets = 8;
  // slackfit: drop heads whose slack fits no bucket (the paper's rule).
  bool slackfit_drop_below_first_bucket = false;
  // slackfit: within a bucket the largest batch ties to the most accurate
  // tuple (false: to the fastest, the paper's).
  bool slackfit_ties_to_accuracy = false;
};

// Everything a policy is built from besides its name and the profile. The
// defaults are the one set of defaults: the router, the simulator and the
// reproduction all start from them (policies/policy_flags.h turns some of
// them into flags).
struct PolicyConfig {
  // Every profile-driven policy's latency table and dispatch overhead
  // (ratefit, symphony, fixed-subnet and the baselines).
  ProfiledPolicyOptions base;
  // fixed-subnet: the profile's subnet id to serve; -1 = the most accurate.
  int32_t fixed_subnet_id = -1;
  // ratefit: RateFitOptions::pace (0 = eager).
  double ratefit_pace = RateFitOptions().pace;
  // ratefit: RateFitOptions::capacity_quantile.
  double ratefit_capacity_quantile = RateFitOptions().capacity_quantile;
  // ratefit: RateFitOptions::rate_window.
  Nanos ratefit_rate_window = RateFitOptions().rate_window;
  // symphony (its .base is replaced by `base`).
  SymphonyOptions symphony;
  // slo-first (its .base is replaced by `base`).
  SloFirstOptions slo_first;
  // orloj, for dynamic models (a profile with a `dynamic` block).
  OrlojOptions orloj;
  BaselineOptions baselines;
};

// The options each product policy runs with for `config`: what MakePolicy
// passes and what PolicySpecJson prints.
RateFitOptions RateFitOptionsFor(const PolicyConfig& config);
SymphonyOptions SymphonyOptionsFor(const PolicyConfig& config);
SloFirstOptions SloFirstOptionsFor(const PolicyConfig& config);

// A policy by name with its configuration (what --policy and the policy flags
// say).
struct PolicySpec {
  // The default policy of the router, the simulator, the reproduction and
  // the main job (docs/scheduling.md: why).
  std::string name = "ratefit";
  PolicyConfig config;
};

// The policy's name and every option in force, for every policy (nested
// options included), as one JSON object on one line; durations in ns
// ("..._ns").
std::string PolicySpecJson(const PolicySpec& spec);

// Builds a policy by name. The product: "ratefit" (the default;
// policies/ratefit_policy.h), "symphony" (deferred batching, one subnet),
// "fixed-subnet" (fixed_subnet_id; -1 = the most accurate subnet) and, for
// dynamic models, "orloj". Any name added with RegisterPolicy (the paper
// baselines of bench/baselines: RegisterBaselinePolicies) is built by its
// maker, which takes precedence over a built-in of the same name. The
// router, the simulator and the reproduction all go through here.
absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                                   const ModelProfile& profile,
                                                   const PolicyConfig& config);

using PolicyMaker =
    std::function<absl::StatusOr<std::unique_ptr<Policy>>(const ModelProfile&, const PolicyConfig&)>;

// Adds (or replaces) an extra policy under `name`, for every later MakePolicy
// and PolicyNames (or, with `dynamic`, DynamicPolicyNames) in this process:
// the bench baselines and tests register policies of their own. A dynamic
// policy's maker is only called with a dynamic profile. Thread-safe.
void RegisterPolicy(const std::string& name, PolicyMaker maker, bool dynamic = false);

// The product names for supernets (ratefit, symphony, fixed-subnet), then the
// registered ones (sorted), each once.
std::vector<std::string> PolicyNames();
// The names for dynamic models: orloj, then the registered dynamic ones
// (sorted).
std::vector<std::string> DynamicPolicyNames();

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_POLICY_FACTORY_H_
