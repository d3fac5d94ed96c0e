#ifndef SUPERSERVE_PLANNER_MODULE_PLANNER_H_
#define SUPERSERVE_PLANNER_MODULE_PLANNER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planner/module.h"
#include "planner/module_plan.h"

namespace superserve {

// Harpagon's ablation steps (Table II) and the full method.
//   kS1: round-robin dispatch, two-tuple configuration (Nexus-like baseline);
//   kS2: batch-aware dispatch, two-tuple;
//   kS3: batch-aware dispatch, any number of tuples (Algorithm 1);
//   kS4: S3 plus dummy requests (the dummy generator);
//   kHarpagon: S4 plus, for applications of several modules, latency
//     reassignment (the slack left after splitting goes to modules' residual
//     workload). For one module it plans exactly as S4.
// Every method splits an application's objective by latency-cost efficiency.
enum class PlanMethod { kS1, kS2, kS3, kS4, kHarpagon };

absl::StatusOr<PlanMethod> ParsePlanMethod(absl::string_view name);
const char* PlanMethodName(PlanMethod method);
Dispatch DispatchOf(PlanMethod method);

// Plans one module: the configuration set that serves `rate` req/s with every
// request's worst-case latency within `budget_s`, at the method's least cost.
// Rate 0 gives an empty plan. Errors: InvalidArgument (bad module, rate or
// budget), FailedPrecondition (no configuration meets the budget at this rate).
absl::StatusOr<ModulePlan> PlanModule(const Module& module, double rate, double budget_s,
                                      PlanMethod method);

}  // namespace superserve

#endif  // SUPERSERVE_PLANNER_MODULE_PLANNER_H_
