#include "planner/application_planner.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"

namespace superserve {

namespace {

// Longest source-to-sink latency through each module, given each module's
// latency: longest path ending at it + longest path starting at it - its own.
class Paths {
 public:
  explicit Paths(const Application& app) : order_(TopologicalOrder(app)) {
    std::map<std::string, int> index;
    for (size_t i = 0; i < app.modules.size(); ++i)
      index[app.modules[i].module.name] = static_cast<int>(i);
    parents_.resize(app.modules.size());
    children_.resize(app.modules.size());
    for (size_t i = 0; i < app.modules.size(); ++i) {
      for (const std::string& p : app.modules[i].after) {
        parents_[i].push_back(index.at(p));
        children_[index.at(p)].push_back(static_cast<int>(i));
      }
    }
  }

  const std::vector<int>& order() const { return order_; }

  // Per module, the longest path through it.
  std::vector<double> Through(const std::vector<double>& latency) const {
    const size_t n = latency.size();
    std::vector<double> to(n, 0), from(n, 0), through(n, 0);
    for (int i : order_) {
      double best = 0;
      for (int p : parents_[i]) best = std::max(best, to[p]);
      to[i] = best + latency[i];
    }
    for (size_t k = order_.size(); k-- > 0;) {
      const int i = order_[k];
      double best = 0;
      for (int c : children_[i]) best = std::max(best, from[c]);
      from[i] = best + latency[i];
    }
    for (size_t i = 0; i < n; ++i) through[i] = to[i] + from[i] - latency[i];
    return through;
  }

  double Longest(const std::vector<double>& latency) const {
    const std::vector<double> t = Through(latency);
    return t.empty() ? 0 : *std::max_element(t.begin(), t.end());
  }

 private:
  std::vector<int> order_;
  std::vector<std::vector<int>> parents_, children_;
};

// The single-configuration worst-case latency Algorithm 2 budgets with.
double SingleConfigLatency(Dispatch dispatch, const BatchConfig& c, double rate) {
  const double per_machine = std::min(rate, c.throughput());
  return GroupWorstLatency(dispatch, c, rate, per_machine);
}

// A module's candidate plans for splitting, fastest first. A budget no plan
// meets (FailedPrecondition) is skipped; any other error (e.g. a rate that
// needs more than kMaxPlannedWorkers) is returned.
absl::StatusOr<std::vector<ModulePlan>> Candidates(const Module& m, double rate, double slo_s,
                                                   PlanMethod method) {
  std::vector<double> budgets;
  for (const BatchConfig& c : m.configs) {
    const double b = SingleConfigLatency(DispatchOf(method), c, rate);
    if (std::isfinite(b) && WithinBudget(b, slo_s)) budgets.push_back(std::min(b, slo_s));
  }
  // Between those levels the residual's plan changes too: a grid of 64 steps
  // lets the walk take smaller increments (it still picks by LC).
  for (int j = 1; j <= 64; ++j) budgets.push_back(slo_s * j / 64);
  std::sort(budgets.begin(), budgets.end());
  std::vector<ModulePlan> out;
  for (double b : budgets) {
    auto p = PlanModule(m, rate, b, method);
    if (!p.ok()) {
      if (p.status().code() != absl::StatusCode::kFailedPrecondition) return p.status();
      continue;
    }
    // Its budget is what it needs: the rest stays for the other modules.
    p->budget_s = p->worst_latency_s;
    out.push_back(*std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const ModulePlan& a, const ModulePlan& b) {
    if (a.worst_latency_s != b.worst_latency_s) return a.worst_latency_s < b.worst_latency_s;
    return a.cost < b.cost;
  });
  return out;
}

}  // namespace

absl::StatusOr<ApplicationPlan> PlanApplication(const Application& app, double rate, double slo_s,
                                                PlanMethod method) {
  if (auto st = ValidateApplication(app); !st.ok()) return st;
  if (!std::isfinite(rate) || rate < 0) {
    return absl::InvalidArgumentError(absl::StrCat("rate must be finite and >= 0, got ", rate));
  }
  if (!std::isfinite(slo_s) || slo_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency objective must be finite and > 0, got ", slo_s * 1e3, " ms"));
  }
  const size_t n = app.modules.size();
  ApplicationPlan out;
  out.method = method;
  std::vector<ModulePlan> current(n);
  std::vector<double> rates(n);
  for (size_t i = 0; i < n; ++i) {
    rates[i] = rate * app.modules[i].rate_factor;
    if (!std::isfinite(rates[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("module ", app.modules[i].module.name, ": rate ", rate, " x rate_factor ",
                       app.modules[i].rate_factor, " is not a finite rate"));
    }
  }
  const Paths paths(app);

  if (n == 1) {
    auto p = PlanModule(app.modules[0].module, rates[0], slo_s, method);
    if (!p.ok()) return p.status();
    current[0] = *std::move(p);
  } else {
    // Algorithm 2 (SplitLatency), over each module's candidate plans.
    std::vector<std::vector<ModulePlan>> candidates(n);
    std::vector<double> latency(n);
    for (size_t i = 0; i < n; ++i) {
      auto c = Candidates(app.modules[i].module, rates[i], slo_s, method);
      if (!c.ok()) return c.status();
      candidates[i] = *std::move(c);
      if (candidates[i].empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "module ", app.modules[i].module.name, ": no plan meets even the whole objective of ",
            slo_s * 1e3, " ms at ", rates[i], " req/s"));
      }
      current[i] = candidates[i].front();
      latency[i] = current[i].worst_latency_s;
    }
    if (!WithinBudget(paths.Longest(latency), slo_s)) {
      return absl::FailedPreconditionError(
          absl::StrCat("objective ", slo_s * 1e3, " ms is too tight: the fastest plans need ",
                       paths.Longest(latency) * 1e3, " ms end to end"));
    }
    while (true) {
      double best_lc = -INFINITY, best_saving = 0;
      int best_module = -1;
      size_t best_candidate = 0;
      for (size_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < candidates[i].size(); ++k) {
          const ModulePlan& c = candidates[i][k];
          const double saving = current[i].cost - c.cost;
          if (saving <= 1e-12) continue;
          const double extra = c.worst_latency_s - current[i].worst_latency_s;
          const double lc = extra <= 1e-15 ? INFINITY : saving / extra;
          if (lc < best_lc || (lc == best_lc && saving <= best_saving)) continue;
          std::vector<double> trial = latency;
          trial[i] = c.worst_latency_s;
          if (!WithinBudget(paths.Longest(trial), slo_s)) continue;
          best_lc = lc;
          best_saving = saving;
          best_module = static_cast<int>(i);
          best_candidate = k;
        }
      }
      if (best_module < 0) break;
      current[best_module] = candidates[best_module][best_candidate];
      latency[best_module] = current[best_module].worst_latency_s;
      ++out.split_iterations;
    }
    if (method == PlanMethod::kHarpagon) {
      // Latency reassignment: the slack each module's longest path leaves.
      for (int pass = 0, changed = 1; changed && pass < 100; ++pass) {
        changed = 0;
        for (int i : paths.order()) {
          const double slack = slo_s - paths.Through(latency)[i];
          if (slack <= 1e-9 * slo_s) continue;
          auto p = PlanModule(app.modules[i].module, rates[i], latency[i] + slack, method);
          if (!p.ok() || p->cost >= current[i].cost - 1e-12) continue;
          current[i] = *std::move(p);
          current[i].budget_s = current[i].worst_latency_s;
          latency[i] = current[i].worst_latency_s;
          ++out.reassignments;
          changed = 1;
        }
      }
    }
  }

  std::vector<double> latency(n);
  double workers = 0;
  for (size_t i = 0; i < n; ++i) {
    out.modules.push_back({app.modules[i].module.name, rates[i], current[i]});
    out.cost += current[i].cost;
    workers += current[i].workers_as_double();
    latency[i] = current[i].worst_latency_s;
  }
  // Each module's plan is within the bound; their sum must be too (int32_t).
  if (workers > kMaxPlannedWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "application ", app.name, ": ", rate, " req/s needs ", workers,
        " workers over its modules, more than the ", kMaxPlannedWorkers, " a plan may start"));
  }
  out.workers = static_cast<int32_t>(workers);
  out.latency_s = paths.Longest(latency);
  return out;
}

}  // namespace superserve
