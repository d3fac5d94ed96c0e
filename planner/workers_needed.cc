#include "planner/workers_needed.h"

#include "planner/module.h"
#include "planner/module_planner.h"

namespace superserve {

absl::StatusOr<int32_t> WorkersNeeded(const ModelProfile& profile, double rate, Nanos slo,
                                      int32_t subnet_id) {
  auto module = ModuleFromProfile(profile, subnet_id);
  if (!module.ok()) return module.status();
  auto plan = PlanModule(*module, rate, ToSeconds(slo), PlanMethod::kHarpagon);
  if (!plan.ok()) return plan.status();
  return plan->workers();
}

}  // namespace superserve
