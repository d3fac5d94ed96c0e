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

// The most workers one plan may start (a module's, or a whole application's).
// Far beyond any cluster (1e8 machines), and it keeps worker counts and their
// sums in int32_t: a rate that needs more is a mistake, not a plan.
constexpr double kMaxPlannedWorkers = 1e8;

// Plans one module: the configuration set that serves `rate` req/s with every
// request's worst-case latency within `budget_s`, at the method's least cost.
// Rate 0 gives an empty plan; any rate > 0 at least one worker. Errors:
// InvalidArgument (bad module, rate or budget; a plan of more than
// kMaxPlannedWorkers workers), FailedPrecondition (no configuration meets the
// budget at this rate, e.g. a budget below the fastest batch's duration).
absl::StatusOr<ModulePlan> PlanModule(const Module& module, double rate, double budget_s,
                                      PlanMethod method);

}  // namespace superserve

#endif  // SUPERSERVE_PLANNER_MODULE_PLANNER_H_
