#ifndef SUPERSERVE_PLANNER_APPLICATION_H_
#define SUPERSERVE_PLANNER_APPLICATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "planner/module.h"

namespace superserve {

// One node of a multi-DNN application: a module, the requests it sees per
// application request (e.g. 2.0 when a detector hands on two crops per frame),
// and the modules whose output it consumes.
struct ApplicationModule {
  Module module;
  double rate_factor = 1.0;
  std::vector<std::string> after;  // parent module names
};

// A directed acyclic graph of modules with one end-to-end latency objective:
// every source-to-sink path's worst-case latencies must add up to within it.
struct Application {
  std::string name;
  std::vector<ApplicationModule> modules;
  // What loading the modules' profiles adjusted (ModelProfile::warnings:
  // dips raised, dominated subnets left out), for the caller to print.
  std::vector<std::string> warnings;
};

// Checks names (non-empty, unique), parents (exist, no cycle), rate factors
// (finite, > 0) and every module.
absl::Status ValidateApplication(const Application& app);

// Module indices in an order where parents come before children (the
// application must be valid).
std::vector<int> TopologicalOrder(const Application& app);

}  // namespace superserve

#endif  // SUPERSERVE_PLANNER_APPLICATION_H_
