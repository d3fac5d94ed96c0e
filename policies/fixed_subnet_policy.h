#ifndef SUPERSERVE_POLICIES_FIXED_SUBNET_POLICY_H_
#define SUPERSERVE_POLICIES_FIXED_SUBNET_POLICY_H_

#include <cstdint>
#include <string>

#include "common/model_profile.h"
#include "policies/profiled_policy.h"

namespace superserve {

// One fixed subnet with adaptive batching: the largest batch that fits the
// head's slack, no larger than the queue needs ("fixed-subnet"; the paper's
// Clipper+ runs it once per accuracy point, INFaaS without accuracy
// constraints is the least accurate subnet). For a user who wants one known
// accuracy and no trading. Its drop threshold is its own subnet's batch-1
// latency.
class FixedSubnetPolicy : public ProfiledPolicy {
 public:
  FixedSubnetPolicy(std::string name, const ModelProfile& profile, int subnet_index,
                    ProfiledPolicyOptions options = {});

  bool MayRun(int32_t subnet_index) const override {
    return subnet_index >= 0 && subnet_index < table_.num_subnets() &&
           table_.rank_of_subnet(subnet_index) == rank_;
  }

 protected:
  Nanos FastestLatency() const override { return table_.latency(rank_, 0); }
  Choice Choose(const SchedulingContext& ctx, const QueueView& view) override;

 private:
  int rank_;
};

// The profile index of the subnet with the given id, or of the most accurate
// subnet for -1; -1 when the profile has no subnet with that id.
int FixedSubnetIndex(const ModelProfile& profile, int32_t subnet_id);

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_FIXED_SUBNET_POLICY_H_
