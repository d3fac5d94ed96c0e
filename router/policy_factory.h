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

namespace superserve {

// Settings a policy may read at construction; each policy ignores what it
// does not use. Filled from the router's flags.
struct PolicyOptions {
  // Clipper+ ("fixed"): the subnet id to serve; -1 = the most accurate one.
  int32_t fixed_subnet_id = -1;
  // SlackFit: number of latency buckets; 0 = the policy's default.
  int32_t slackfit_buckets = 0;
};

// Maps --policy names to policies/ classes. The router owns no scheduling
// logic: every decision comes from a Policy made here. Tests and benchmarks
// may register extra policies of their own.
class PolicyFactory {
 public:
  using Maker = std::function<absl::StatusOr<std::unique_ptr<Policy>>(const ModelProfile&,
                                                                      const PolicyOptions&)>;

  // The process-wide factory with every standard policy registered.
  static PolicyFactory& Global();

  // Adds (or replaces) a policy under `name`.
  void Register(const std::string& name, Maker maker);
  absl::StatusOr<std::unique_ptr<Policy>> Create(const std::string& name,
                                                 const ModelProfile& profile,
                                                 const PolicyOptions& options) const;
  std::vector<std::string> Names() const;
  bool Has(const std::string& name) const { return makers_.count(name) > 0; }

 private:
  std::map<std::string, Maker> makers_;
};

// Registers the policies/ implementations under their --policy names.
void RegisterStandardPolicies(PolicyFactory* factory);

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_POLICY_FACTORY_H_
