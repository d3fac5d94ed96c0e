#include "planner/workers_needed.h"

#include "planner/module.h"
#include "planner/module_planner.h"

namespace superserve {

absl::StatusOr<int32_t> WorkersNeeded(const ModelProfile& profile, double rate, Nanos slo,
                                      int32_t subnet_id, Nanos batch_overhead) {
  auto module = ModuleFromProfile(profile, subnet_id);
  if (!module.ok()) return module.status();
  if (batch_overhead < 0) return absl::InvalidArgumentError("batch overhead must be >= 0");
  for (BatchConfig& c : module->configs) c.duration_s += ToSeconds(batch_overhead);
  auto plan = PlanModule(*module, rate, ToSeconds(slo), PlanMethod::kHarpagon);
  if (!plan.ok()) return plan.status();
  return plan->workers();
}

}  // namespace superserve
