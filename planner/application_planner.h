#ifndef SUPERSERVE_PLANNER_APPLICATION_PLANNER_H_
#define SUPERSERVE_PLANNER_APPLICATION_PLANNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/application.h"
#include "planner/module_plan.h"
#include "planner/module_planner.h"

namespace superserve {

struct PlannedModule {
  std::string name;
  double rate = 0;  // application rate x rate_factor
  ModulePlan plan;  // plan.budget_s is the module's latency budget
};

struct ApplicationPlan {
  PlanMethod method = PlanMethod::kHarpagon;
  std::vector<PlannedModule> modules;  // in the application's order
  double cost = 0;
  int32_t workers = 0;
  double latency_s = 0;          // the longest path of worst-case latencies
  int32_t split_iterations = 0;  // Algorithm 2 updates taken
  int32_t reassignments = 0;     // modules re-planned with reassigned slack
};

// Plans a whole application for `rate` application requests per second and an
// end-to-end objective of `slo_s`. One module gets the whole objective. With
// several, Algorithm 2 splits it: every module starts at its fastest plan and,
// while some cheaper plan of some module still fits the objective on every
// path, takes the one with the largest latency-cost efficiency
// LC = (cost_prev - cost_new) / (latency_new - latency_prev). A module's
// candidate plans are the method's plans for the budgets d + b / T (one per
// batch size; 2d for round-robin) and a 64-step grid of the objective, each at
// the worst-case latency it reaches. kHarpagon then gives each module, in
// topological order, the slack its longest path leaves and re-plans it when
// that is cheaper (latency reassignment).
absl::StatusOr<ApplicationPlan> PlanApplication(const Application& app, double rate, double slo_s,
                                                PlanMethod method);

}  // namespace superserve

#endif  // SUPERSERVE_PLANNER_APPLICATION_PLANNER_H_
