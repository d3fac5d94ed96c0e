#ifndef SUPERSERVE_PLANNER_MODULE_H_
#define SUPERSERVE_PLANNER_MODULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_profile.h"

namespace superserve {

// One way to run a module on one machine: a batch size and the time one batch
// takes (Harpagon's profile row <b, d>; throughput t = b / d).
struct BatchConfig {
  int32_t batch = 0;
  double duration_s = 0;
  double throughput() const { return batch / duration_s; }
};

// A plain DNN module as Harpagon plans it: its profiled batch configurations
// and the unit price of the machine it runs on (cost = price x rate / t).
struct Module {
  std::string name;
  std::vector<BatchConfig> configs;
  double price = 1.0;
};

// Checks a module: at least one configuration, batches > 0 and unique,
// durations finite and > 0, price finite and > 0.
absl::Status ValidateModule(const Module& module);

// The module one subnet of a ModelProfile is: its latency per batch size.
// subnet_id -1 picks the most accurate subnet.
absl::StatusOr<Module> ModuleFromProfile(const ModelProfile& profile, int32_t subnet_id = -1);

}  // namespace superserve

#endif  // SUPERSERVE_PLANNER_MODULE_H_
