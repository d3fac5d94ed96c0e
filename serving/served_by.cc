// DescribeServed: what an answer says served its query (served_by.h).
#include "serving/served_by.h"

namespace superserve {

void DescribeServed(const ModelProfile& profile, int32_t subnet_index, int32_t threshold_index,
                    std::string_view application, int32_t exit, QueryAnswer* a) {
  const SubnetProfile* subnet = subnet_index >= 0 ? &profile.subnets[subnet_index] : nullptr;
  a->subnet_id = subnet != nullptr ? subnet->id : -1;
  a->accuracy = subnet != nullptr ? subnet->accuracy : 0;
  if (!profile.is_dynamic) return;
  const DynamicModelProfile& dyn = profile.dynamic;
  a->exit_threshold =
      threshold_index >= 0 ? dyn.thresholds[threshold_index].threshold : dyn.default_threshold;
  a->exit = exit;
  // The exit's accuracy at the batch's threshold; an exit not reported: the
  // application's expected one.
  a->accuracy = exit >= 0 ? dyn.ExitAccuracy(application, exit, threshold_index)
                          : dyn.ExpectedAccuracy(application, threshold_index);
}

}  // namespace superserve
