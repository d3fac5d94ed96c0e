#include "planner/module_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"

namespace superserve {

namespace {

// Rates below this fraction of the module's rate are rounding, not workload.
// Relative to the rate alone, with no absolute floor: with one (max(1, rate))
// a whole rate below 1e-9 req/s counted as rounding and got no machine.
constexpr double kRateEps = 1e-9;
double RateEps(double rate) { return kRateEps * rate; }

// The module's configurations by throughput-cost ratio (t / price; one price
// per module, so by throughput), highest first; ties to the smaller batch.
std::vector<BatchConfig> ByRatio(const Module& m) {
  std::vector<BatchConfig> c = m.configs;
  std::stable_sort(c.begin(), c.end(), [](const BatchConfig& a, const BatchConfig& b) {
    if (a.throughput() != b.throughput()) return a.throughput() > b.throughput();
    return a.batch < b.batch;
  });
  return c;
}

MachineGroup Group(const BatchConfig& c, double rate) {
  MachineGroup g;
  g.config = c;
  g.rate = rate;
  g.machines = rate / c.throughput();
  return g;
}

// Whole machines of `c` that `rw` fills (rounding-tolerant).
double FullMachines(const BatchConfig& c, double rw) {
  return std::floor(rw / c.throughput() + 1e-9);
}

// Can `c` take the next group when `rw` req/s are still unassigned? The group
// is floor(rw / t) full machines if that is >= 1, else one partial machine
// carrying all of rw; either way it collects at rw (batch-aware) or at one
// machine's rate (round-robin).
bool Fits(Dispatch dispatch, const BatchConfig& c, double rw, double budget) {
  const double per_machine = FullMachines(c, rw) >= 1 ? c.throughput() : rw;
  return WithinBudget(GroupWorstLatency(dispatch, c, rw, per_machine), budget);
}

// Algorithm 1 (GenerateConfig): walk the configurations by ratio; while the
// current one meets the budget at the remaining workload, give it as many full
// machines as the workload fills, or the whole remainder as one partial
// machine; otherwise move on to the next configuration.
std::optional<std::vector<MachineGroup>> MultiTuple(const std::vector<BatchConfig>& configs,
                                                    double rate, double budget, Dispatch dispatch) {
  std::vector<MachineGroup> groups;
  const double eps = RateEps(rate);
  double rw = rate;
  size_t k = 0;
  while (rw > eps) {
    const BatchConfig& c = configs[k];
    if (Fits(dispatch, c, rw, budget)) {
      const double full = FullMachines(c, rw);
      if (full >= 1) {
        groups.push_back(Group(c, full * c.throughput()));
        groups.back().machines = full;
        rw -= full * c.throughput();
      } else {
        groups.push_back(Group(c, rw));
        rw = 0;
      }
    } else if (++k >= configs.size()) {
      return std::nullopt;
    }
  }
  return groups;
}

// The two-tuple heuristic of existing systems: the majority on the
// highest-throughput configuration that meets the budget at the full rate
// (floor(T / t) machines), then the residual entirely on the one
// configuration that serves it at least cost (its full machines collect at the
// residual rate, its partial machine at its own rate).
std::optional<std::vector<MachineGroup>> TwoTuple(const std::vector<BatchConfig>& configs,
                                                  double rate, double budget, Dispatch dispatch) {
  std::vector<MachineGroup> groups;
  const double eps = RateEps(rate);
  double residual = rate;
  for (const BatchConfig& c : configs) {
    if (!Fits(dispatch, c, rate, budget)) continue;
    const double full = FullMachines(c, rate);
    if (full >= 1) {
      groups.push_back(Group(c, full * c.throughput()));
      groups.back().machines = full;
      residual -= full * c.throughput();
    }
    break;
  }
  if (residual <= eps) return groups;
  for (const BatchConfig& c : configs) {
    const double full = FullMachines(c, residual);
    const double partial = residual - full * c.throughput();
    if (full >= 1 && !Fits(dispatch, c, residual, budget)) continue;
    if (partial > eps && !Fits(dispatch, c, partial, budget)) continue;
    if (full >= 1) {
      groups.push_back(Group(c, full * c.throughput()));
      groups.back().machines = full;
    }
    if (partial > eps) groups.push_back(Group(c, partial));
    return groups;
  }
  return std::nullopt;
}

ModulePlan Finish(const Module& m, std::vector<MachineGroup> groups, double rate, double budget,
                  Dispatch dispatch) {
  ModulePlan p;
  p.groups = std::move(groups);
  p.rate = rate;
  p.budget_s = budget;
  double total = 0;
  for (const MachineGroup& g : p.groups) {
    total += g.rate;
    p.cost += g.machines;
  }
  p.cost *= m.price;
  p.dummy_rate = std::max(0.0, total - rate);
  if (p.dummy_rate < RateEps(rate)) p.dummy_rate = 0;
  AnnotateWorstLatency(dispatch, &p);
  return p;
}

// The dummy generator (§III-C): for each tuple c_i of the plan whose leftover
// workload u_i (everything dispatched after it) is below its throughput t_i,
// add t_i - u_i dummy req/s so that c_i takes the leftover on one more machine,
// and keep the cheapest result. When no configuration meets the budget at the
// real rate, dummy requests also raise the collection rate until one does
// (w = b / (budget - d)).
std::optional<ModulePlan> WithDummies(const Module& m, const std::vector<BatchConfig>& configs,
                                      double rate, double budget) {
  const Dispatch d = Dispatch::kBatchAware;
  std::optional<ModulePlan> best;
  auto consider = [&](double planned_rate) {
    auto groups = MultiTuple(configs, planned_rate, budget, d);
    if (!groups) return;
    ModulePlan p = Finish(m, *std::move(groups), rate, budget, d);
    if (!best || p.cost < best->cost - 1e-12) best = std::move(p);
  };
  consider(rate);
  if (!best) {
    for (const BatchConfig& c : configs) {
      if (budget > c.duration_s) consider(std::max(rate, c.batch / (budget - c.duration_s)));
    }
    return best;
  }
  const std::vector<MachineGroup> tuples = best->Tuples();
  const double base_dummy = best->dummy_rate;
  const double eps = RateEps(rate);
  for (size_t i = 0; i < tuples.size(); ++i) {
    double leftover = 0;
    for (size_t j = i + 1; j < tuples.size(); ++j) leftover += tuples[j].rate;
    const double t = tuples[i].config.throughput();
    if (leftover > eps && leftover < t - eps) consider(rate + base_dummy + (t - leftover));
  }
  return best;
}

// Algorithm 1 searched with dummy requests at every step (kHarpagon): where
// the current configuration c takes floor(rw / t) full machines and leaves
// some workload, dummies may instead round its group up by one machine that
// absorbs the rest (the dummy generator's t_i - u_i, applied inside the walk
// so that it also works when the rest could not be served otherwise); where c
// misses the budget at rw, dummies may raise rw to the collection rate c needs
// (b / (budget - d), ours) so that c takes it. Each configuration is raised at
// most once on a branch; the cheapest branch wins.
struct Branch {
  std::vector<MachineGroup> groups;
  double machines = 0;
};

std::optional<Branch> PaddedFrom(const std::vector<BatchConfig>& configs, double rw, size_t k,
                                 double budget, double eps, uint64_t raised) {
  if (rw <= eps) return Branch{};
  if (k >= configs.size()) return std::nullopt;
  const BatchConfig& c = configs[k];
  std::optional<Branch> best;
  auto keep = [&best](std::optional<Branch> b) {
    if (b && (!best || b->machines < best->machines - 1e-12)) best = std::move(b);
  };
  if (!Fits(Dispatch::kBatchAware, c, rw, budget)) {
    keep(PaddedFrom(configs, rw, k + 1, budget, eps, raised));
    const uint64_t bit = k < 64 ? uint64_t{1} << k : 0;
    if (bit != 0 && !(raised & bit) && budget > c.duration_s) {
      const double need = c.batch / (budget - c.duration_s) * (1 + 1e-12);
      if (need > rw) keep(PaddedFrom(configs, need, k, budget, eps, raised | bit));
    }
    return best;
  }
  const double t = c.throughput();
  const double full = FullMachines(c, rw);
  if (full < 1) {
    Branch b;
    b.groups.push_back(Group(c, rw));
    b.machines = b.groups.back().machines;
    return b;
  }
  MachineGroup head = Group(c, full * t);
  head.machines = full;
  const double rest = rw - full * t;
  if (auto tail = PaddedFrom(configs, rest, k, budget, eps, raised)) {
    tail->groups.insert(tail->groups.begin(), head);
    tail->machines += full;
    keep(std::move(tail));
  }
  if (rest > eps) {
    Branch up;
    up.groups.push_back(Group(c, (full + 1) * t));
    up.groups.back().machines = full + 1;
    up.machines = full + 1;
    keep(std::move(up));
  }
  return best;
}

std::optional<Branch> PaddedMultiTuple(const std::vector<BatchConfig>& configs, double rate,
                                       double budget) {
  return PaddedFrom(configs, rate, 0, budget, RateEps(rate), 0);
}

}  // namespace

absl::StatusOr<PlanMethod> ParsePlanMethod(absl::string_view name) {
  if (name == "s1") return PlanMethod::kS1;
  if (name == "s2") return PlanMethod::kS2;
  if (name == "s3") return PlanMethod::kS3;
  if (name == "s4") return PlanMethod::kS4;
  if (name == "harpagon") return PlanMethod::kHarpagon;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown method \"", name, "\" (s1, s2, s3, s4 or harpagon)"));
}

const char* PlanMethodName(PlanMethod method) {
  switch (method) {
    case PlanMethod::kS1:
      return "s1";
    case PlanMethod::kS2:
      return "s2";
    case PlanMethod::kS3:
      return "s3";
    case PlanMethod::kS4:
      return "s4";
    case PlanMethod::kHarpagon:
      return "harpagon";
  }
  return "?";
}

Dispatch DispatchOf(PlanMethod method) {
  return method == PlanMethod::kS1 ? Dispatch::kRoundRobin : Dispatch::kBatchAware;
}

absl::StatusOr<ModulePlan> PlanModule(const Module& module, double rate, double budget_s,
                                      PlanMethod method) {
  if (auto st = ValidateModule(module); !st.ok()) return st;
  if (!std::isfinite(rate) || rate < 0) {
    return absl::InvalidArgumentError(absl::StrCat("rate must be finite and >= 0, got ", rate));
  }
  if (!std::isfinite(budget_s) || budget_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency budget must be finite and > 0, got ", budget_s, " s"));
  }
  const Dispatch dispatch = DispatchOf(method);
  const std::vector<BatchConfig> configs = ByRatio(module);
  if (rate == 0) return Finish(module, {}, 0, budget_s, dispatch);
  // A batch takes at least its duration however fast it fills (dummy requests
  // only speed up the filling): a budget below the fastest batch's duration
  // has no plan at any rate, so the error says that, naming the batch.
  const BatchConfig& fastest = *std::min_element(
      configs.begin(), configs.end(),
      [](const BatchConfig& a, const BatchConfig& b) { return a.duration_s < b.duration_s; });
  if (!WithinBudget(fastest.duration_s, budget_s)) {
    return absl::FailedPreconditionError(
        absl::StrCat("module ", module.name, ": a latency budget of ", budget_s * 1e3,
                     " ms is below the fastest configuration's latency (batch ", fastest.batch,
                     ": ", fastest.duration_s * 1e3, " ms); no batch size can meet it"));
  }
  std::optional<ModulePlan> plan;
  switch (method) {
    case PlanMethod::kS1:
    case PlanMethod::kS2:
      if (auto g = TwoTuple(configs, rate, budget_s, dispatch)) {
        plan = Finish(module, *std::move(g), rate, budget_s, dispatch);
      }
      break;
    case PlanMethod::kS3:
      if (auto g = MultiTuple(configs, rate, budget_s, dispatch)) {
        plan = Finish(module, *std::move(g), rate, budget_s, dispatch);
      }
      break;
    case PlanMethod::kS4:
    case PlanMethod::kHarpagon:
      plan = WithDummies(module, configs, rate, budget_s);
      if (method == PlanMethod::kHarpagon) {
        if (auto padded = PaddedMultiTuple(configs, rate, budget_s)) {
          ModulePlan p = Finish(module, padded->groups, rate, budget_s, dispatch);
          if (!plan || p.cost < plan->cost - 1e-12) plan = std::move(p);
        }
      }
      break;
  }
  if (!plan) {
    return absl::FailedPreconditionError(
        absl::StrCat("module ", module.name, ": no configuration meets a ", budget_s * 1e3,
                     " ms budget at ", rate, " req/s with method ", PlanMethodName(method)));
  }
  if (plan->workers_as_double() > kMaxPlannedWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("module ", module.name, ": ", rate, " req/s needs ", plan->workers_as_double(),
                     " workers, more than the ", kMaxPlannedWorkers, " a plan may start"));
  }
  return *std::move(plan);
}

}  // namespace superserve
