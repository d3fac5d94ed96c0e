#ifndef SUPERSERVE_PLANNER_MODULE_PLAN_H_
#define SUPERSERVE_PLANNER_MODULE_PLAN_H_

#include <cstdint>
#include <vector>

#include "planner/module.h"

namespace superserve {

// How a module's front end hands requests to its machines (Harpagon §II, §III-B).
//   kRoundRobin: one request at a time, each machine collects its own batch at
//     its own rate f, so a batch waits b / f (2d at full load).
//   kBatchAware: b consecutive requests at a time, machines in dispatch order;
//     a machine collects at w, the rate of its group plus every group after it
//     (Theorem 1), so a batch waits b / w.
enum class Dispatch { kRoundRobin, kBatchAware };

// One dispatch group: `machines` machines of one configuration sharing `rate`
// in turn. Either a whole number of fully loaded machines, or one partially
// loaded machine (machines < 1) that forms a group of its own.
struct MachineGroup {
  BatchConfig config;
  double rate = 0;      // req/s, dummy requests included
  double machines = 0;  // rate / throughput
  double worst_latency_s = 0;
};

// A module's configuration set, in dispatch order.
struct ModulePlan {
  std::vector<MachineGroup> groups;
  double rate = 0;        // the real request rate
  double dummy_rate = 0;  // dummy requests added (req/s)
  double budget_s = 0;    // the latency budget it was planned for
  double cost = 0;        // price x sum of machines (frame-rate proportional)
  double worst_latency_s = 0;

  // Machines to start: every fully loaded one plus one per partial group.
  // PlanModule keeps it within kMaxPlannedWorkers, so it fits an int32_t.
  int32_t workers() const;
  // The same count as a double, which cannot overflow (to check that bound).
  double workers_as_double() const;
  // The paper's tuples T_i (n_i x b_i): consecutive groups of one batch size merged.
  std::vector<MachineGroup> Tuples() const;
};

// Worst-case latency of one group: d + b / w (batch-aware, w = rate of the group
// and everything dispatched after it) or d + b / f (round-robin, f = one
// machine's rate).
double GroupWorstLatency(Dispatch dispatch, const BatchConfig& config, double rate_from_here,
                         double per_machine_rate);

// Fills every group's worst_latency_s and the plan's (the maximum), in dispatch order.
void AnnotateWorstLatency(Dispatch dispatch, ModulePlan* plan);

// True when `latency_s` meets `budget_s` (a relative 1e-9 tolerance absorbs
// rounding in d + b / w).
bool WithinBudget(double latency_s, double budget_s);

}  // namespace superserve

#endif  // SUPERSERVE_PLANNER_MODULE_PLAN_H_
