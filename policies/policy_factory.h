#ifndef SUPERSERVE_POLICIES_POLICY_FACTORY_H_
#define SUPERSERVE_POLICIES_POLICY_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_profile.h"
#include "policies/policy.h"
#include "policies/slackfit_policy.h"

namespace superserve {

struct PolicyConfig {
  SlackFitOptions slackfit;   // its .base applies to every policy
  int32_t fixed_subnet_id = -1;  // Clipper+: the profile's subnet id to serve; -1 = most accurate
};

// Builds a policy by name: "slackfit", "slackfit-ma" (DESIGN.md's
// most-accurate partial batches, ablation), "slackfit-rg" (rate guard, ours), "maxbatch", "maxacc",
// "clipper+" (fixed_subnet_id; -1 = the most accurate), "infaas". The simulator's --policy and
// the router's configuration both go through here.
absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                                   const ModelProfile& profile,
                                                   const PolicyConfig& config);

std::vector<std::string> PolicyNames();

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_POLICY_FACTORY_H_
