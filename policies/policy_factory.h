#ifndef SUPERSERVE_POLICIES_POLICY_FACTORY_H_
#define SUPERSERVE_POLICIES_POLICY_FACTORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_profile.h"
#include "policies/dynamic_baselines.h"
#include "policies/orloj_policy.h"
#include "policies/policy.h"
#include "policies/ratefit_policy.h"
#include "policies/slackfit_policy.h"

namespace superserve {

// Everything a policy is built from besides its name and the profile. The
// defaults are the one set of defaults: the router, the simulator and the
// reproduction all start from them (policies/policy_flags.h turns them into
// flags).
struct PolicyConfig {
  SlackFitOptions slackfit;   // its .base applies to every policy
  // clipper+: the profile's subnet id to serve; -1 = the most accurate one.
  int32_t fixed_subnet_id = -1;
  // ratefit and shadowfit: RateFitOptions::pace (0 = eager).
  double ratefit_pace = RateFitOptions().pace;
  // ratefit and shadowfit: RateFitOptions::capacity_quantile.
  double ratefit_capacity_quantile = RateFitOptions().capacity_quantile;
  // Dynamic models (a profile with a `dynamic` block): orloj, clockwork,
  // nexus.
  OrlojOptions orloj;
  ClockworkLikeOptions clockwork;
  NexusLikeOptions nexus;
};

// A policy by name with its configuration (what --policy and the policy flags
// say).
struct PolicySpec {
  // The default policy of the router, the simulator, the reproduction and
  // the main job (docs/scheduling.md: why).
  std::string name = "ratefit";
  PolicyConfig config;
};

// Every field of `spec` (nested options included) as one JSON object on one
// line; durations in ns ("..._ns"), bucket_ties as "throughput" / "accuracy".
std::string PolicySpecJson(const PolicySpec& spec);

// "throughput" / "accuracy".
const char* BucketTiesName(LatencyBuckets::Ties ties);

// Builds a policy by name: "ratefit" (the default; policies/ratefit_policy.h),
// "slackfit" (SuperServe's SlackFit), "slackfit-ma" (DESIGN.md's
// most-accurate partial batches, ablation), "slackfit-rg" (rate guard, ours),
// "maxbatch", "maxacc", "clipper+" (fixed_subnet_id; -1 = the most accurate
// subnet), "infaas", "symphony" (deferred batching, one subnet); for dynamic
// models "orloj", "clockwork" (Clockwork-like) and "nexus" (Nexus-like); and
// any name added with RegisterPolicy (which takes
// precedence over a built-in of the same name). The router, the simulator and
// the reproduction all go through here.
absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                                   const ModelProfile& profile,
                                                   const PolicyConfig& config);

using PolicyMaker =
    std::function<absl::StatusOr<std::unique_ptr<Policy>>(const ModelProfile&, const PolicyConfig&)>;

// Adds (or replaces) an extra policy under `name`, for every later MakePolicy
// and PolicyNames in this process (tests register policies of their own).
// Thread-safe.
void RegisterPolicy(const std::string& name, PolicyMaker maker);

// The built-in names for supernets, then the registered ones (sorted), each
// once.
std::vector<std::string> PolicyNames();
// The built-in names for dynamic models: orloj, clockwork, nexus.
std::vector<std::string> DynamicPolicyNames();

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_POLICY_FACTORY_H_
