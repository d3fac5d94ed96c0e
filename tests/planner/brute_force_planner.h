#ifndef SUPERSERVE_TESTS_PLANNER_BRUTE_FORCE_PLANNER_H_
#define SUPERSERVE_TESTS_PLANNER_BRUTE_FORCE_PLANNER_H_

#include <vector>

#include "planner/module.h"
#include "planner/module_plan.h"

namespace superserve::testing {

// A dispatch group as the feasibility check sees it: its rate and the
// collection rate it needs, b / (budget - d).
struct GroupDemand {
  double rate = 0;
  double need = 0;
};

// Whether some dispatch order gives every group a collection rate w (its own
// rate plus every later group's) >= its need. Built from the back: a group
// that fits there never hurts the ones before it, so placing any fitting
// group first is as good as any other choice.
bool SomeOrderFits(const std::vector<GroupDemand>& groups);

// The least-cost batch-aware plan for `rate` req/s within `budget_s` by
// exhaustive search over: any number of fully loaded machines per
// configuration (each configuration one dispatch group), plus at most one
// partially loaded machine of any configuration (its own group) at any real
// rate, dummy requests allowed (total >= rate), in any dispatch order. The
// partial rate is the least that fits (bisection; feasibility only grows
// with it). Returns +inf when nothing fits.
double BruteForceModuleCost(const Module& module, double rate, double budget_s);

// The planner's plan as groups for SomeOrderFits (an independent check that
// a plan meets its budget with batch-aware dispatch).
std::vector<GroupDemand> Demands(const ModulePlan& plan, double budget_s);

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_PLANNER_BRUTE_FORCE_PLANNER_H_
