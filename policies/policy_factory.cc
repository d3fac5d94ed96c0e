#include "policies/policy_factory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "policies/greedy_policies.h"

namespace superserve {

std::vector<std::string> PolicyNames() {
  return {"slackfit", "slackfit-ma", "slackfit-rg", "maxbatch", "maxacc", "clipper+", "infaas"};
}

absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                                   const ModelProfile& profile,
                                                   const PolicyConfig& config) {
  if (profile.subnets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile \"", profile.model, "\" has no subnets to schedule"));
  }
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
  if (name == "maxbatch") return std::make_unique<MaxBatchPolicy>(profile, base);
  if (name == "maxacc") return std::make_unique<MaxAccPolicy>(profile, base);
  if (name == "infaas") {
    int least = 0;
    for (int i = 1; i < static_cast<int>(profile.subnets.size()); ++i) {
      if (profile.subnets[i].accuracy < profile.subnets[least].accuracy) least = i;
    }
    return std::make_unique<FixedSubnetPolicy>("infaas", profile, least, base);
  }
  if (name == "clipper+" || name == "clipper") {
    // -1: the profile's most accurate subnet (first on ties).
    int index = 0;
    if (config.fixed_subnet_id >= 0) {
      index = profile.SubnetIndex(config.fixed_subnet_id);
    } else {
      for (int i = 1; i < static_cast<int>(profile.subnets.size()); ++i) {
        if (profile.subnets[i].accuracy > profile.subnets[index].accuracy) index = i;
      }
    }
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policy clipper+ needs --fixed-subnet set to a subnet id of profile \"", profile.model,
          "\"; got ", config.fixed_subnet_id));
    }
    return std::make_unique<FixedSubnetPolicy>(
        absl::StrCat("clipper+(", profile.subnets[index].accuracy, ")"), profile, index, base);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown policy \"", name, "\"; known: ",
                                                 absl::StrJoin(PolicyNames(), ", ")));
}

}  // namespace superserve
