#ifndef SUPERSERVE_TESTS_PLANNER_BRUTE_FORCE_PLANNER_H_
#define SUPERSERVE_TESTS_PLANNER_BRUTE_FORCE_PLANNER_H_

#include "planner/module.h"

namespace superserve::testing {

// The least-cost batch-aware plan for `rate` req/s within `budget_s`, by
// exhaustive search over the plans the planner draws from: any number of fully
// loaded machines per configuration plus at most one partially loaded machine
// of any configuration at any real rate (full machines per configuration up
// to what the rate or the batch's collection rate b / (budget - d) needs, plus
// one), dummy requests allowed (total rate >= `rate`), dispatched in throughput-cost order (Theorem
// 1; a configuration's full machines before its partial one, as Algorithm 1 orders them). For each
// choice of machines the partial rate is the least that fits (bisection:
// feasibility only grows with it). Returns +inf when nothing fits.
double BruteForceModuleCost(const Module& module, double rate, double budget_s);

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_PLANNER_BRUTE_FORCE_PLANNER_H_
