#include "policies/fixed_subnet_policy.h"

#include <algorithm>
#include <utility>

namespace superserve {

FixedSubnetPolicy::FixedSubnetPolicy(std::string name, const ModelProfile& profile,
                                     int subnet_index, ProfiledPolicyOptions options)
    : ProfiledPolicy(std::move(name), profile, options),
      rank_(table_.rank_of_subnet(subnet_index)) {}

ProfiledPolicy::Choice FixedSubnetPolicy::Choose(const SchedulingContext& ctx,
                                                 const QueueView& view) {
  int b = table_.LargestBatchWithin(rank_, view.slack);
  if (b < 0) b = 0;
  if (view.pending < table_.batch_size(b)) b = std::min(b, table_.BatchIndexFor(view.pending));
  return Choice{rank_, b};
}

int FixedSubnetIndex(const ModelProfile& profile, int32_t subnet_id) {
  if (subnet_id != -1) return profile.SubnetIndex(subnet_id);
  if (profile.subnets.empty()) return -1;
  int index = 0;
  for (int i = 1; i < static_cast<int>(profile.subnets.size()); ++i) {
    if (profile.subnets[i].accuracy > profile.subnets[index].accuracy) index = i;
  }
  return index;
}

}  // namespace superserve
