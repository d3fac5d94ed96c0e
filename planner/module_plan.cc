#include "planner/module_plan.h"

#include <cmath>

namespace superserve {

namespace {
// A group's machine count is whole up to rounding in rate / throughput.
constexpr double kMachineEps = 1e-9;
}  // namespace

double ModulePlan::workers_as_double() const {
  double n = 0;
  for (const MachineGroup& g : groups) n += std::ceil(g.machines - kMachineEps);
  return n;
}

int32_t ModulePlan::workers() const { return static_cast<int32_t>(workers_as_double()); }

std::vector<MachineGroup> ModulePlan::Tuples() const {
  std::vector<MachineGroup> out;
  for (const MachineGroup& g : groups) {
    if (!out.empty() && out.back().config.batch == g.config.batch) {
      out.back().rate += g.rate;
      out.back().machines += g.machines;
      out.back().worst_latency_s = std::max(out.back().worst_latency_s, g.worst_latency_s);
    } else {
      out.push_back(g);
    }
  }
  return out;
}

double GroupWorstLatency(Dispatch dispatch, const BatchConfig& config, double rate_from_here,
                         double per_machine_rate) {
  const double w = dispatch == Dispatch::kBatchAware ? rate_from_here : per_machine_rate;
  if (!(w > 0)) return INFINITY;
  return config.duration_s + config.batch / w;
}

void AnnotateWorstLatency(Dispatch dispatch, ModulePlan* plan) {
  double after = 0;
  plan->worst_latency_s = 0;
  for (size_t i = plan->groups.size(); i-- > 0;) {
    MachineGroup& g = plan->groups[i];
    after += g.rate;
    const double machines = std::ceil(g.machines - kMachineEps);
    g.worst_latency_s =
        GroupWorstLatency(dispatch, g.config, after, machines > 0 ? g.rate / machines : 0);
    plan->worst_latency_s = std::max(plan->worst_latency_s, g.worst_latency_s);
  }
}

bool WithinBudget(double latency_s, double budget_s) {
  return latency_s <= budget_s + 1e-9 * std::max(1.0, std::abs(budget_s));
}

}  // namespace superserve
