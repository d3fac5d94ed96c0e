#ifndef SUPERSERVE_ROUTER_POLICY_FACTORY_H_
#define SUPERSERVE_ROUTER_POLICY_FACTORY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_profile.h"
#include "policies/policy.h"
#include "policies/policy_factory.h"

namespace superserve {

// Maps --policy names to policies/ classes (policies/policy_factory.h's
// MakePolicy: slackfit, slackfit-rg, maxbatch, maxacc, clipper+, infaas). The
// router owns no scheduling logic: every decision comes from a Policy made
// here. Tests may register extra policies of their own under new names.
class PolicyFactory {
 public:
  using Maker = std::function<absl::StatusOr<std::unique_ptr<Policy>>(const ModelProfile&,
                                                                      const PolicyConfig&)>;

  static PolicyFactory& Global();

  // Adds (or replaces) an extra policy under `name`.
  void Register(const std::string& name, Maker maker);
  // clipper+ with fixed_subnet_id = -1 serves the profile's most accurate subnet.
  absl::StatusOr<std::unique_ptr<Policy>> Create(const std::string& name,
                                                 const ModelProfile& profile,
                                                 const PolicyConfig& config) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, Maker> extra_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_POLICY_FACTORY_H_
