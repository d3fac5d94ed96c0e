#include "tests/planner/brute_force_planner.h"

#include <cmath>
#include <functional>
#include <limits>

namespace superserve::testing {

namespace {

// The least collection rate w with d + b / w within the budget, with the
// planner's tolerance (WithinBudget).
double Need(const BatchConfig& c, double budget) {
  const double room = budget + 1e-9 * std::max(1.0, std::abs(budget)) - c.duration_s;
  return room > 0 ? c.batch / room : std::numeric_limits<double>::infinity();
}

}  // namespace

bool SomeOrderFits(const std::vector<GroupDemand>& groups) {
  std::vector<bool> placed(groups.size(), false);
  double after = 0;
  for (size_t round = 0; round < groups.size(); ++round) {
    bool any = false;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (placed[i]) continue;
      if (after + groups[i].rate >= groups[i].need * (1 - 1e-12)) {
        placed[i] = true;
        after += groups[i].rate;
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  return true;
}

std::vector<GroupDemand> Demands(const ModulePlan& plan, double budget_s) {
  std::vector<GroupDemand> out;
  for (const MachineGroup& g : plan.groups) out.push_back({g.rate, Need(g.config, budget_s)});
  return out;
}

double BruteForceModuleCost(const Module& module, double rate, double budget_s) {
  const size_t k = module.configs.size();
  std::vector<int> limit(k);
  for (size_t i = 0; i < k; ++i) {
    limit[i] = static_cast<int>(std::ceil(rate / module.configs[i].throughput())) + 1;
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> count(k, 0);
  std::vector<GroupDemand> groups;
  auto evaluate = [&]() {
    double full_rate = 0, full_cost = 0;
    groups.clear();
    for (size_t i = 0; i < k; ++i) {
      if (count[i] == 0) continue;
      const double r = count[i] * module.configs[i].throughput();
      full_rate += r;
      full_cost += count[i] * module.price;
      groups.push_back({r, Need(module.configs[i], budget_s)});
    }
    if (full_cost >= best) return;
    if (full_rate >= rate * (1 - 1e-12) && SomeOrderFits(groups)) best = full_cost;
    // Plus one partial machine of configuration p.
    for (size_t p = 0; p < k; ++p) {
      const BatchConfig& c = module.configs[p];
      const double t = c.throughput();
      const double lo = std::max(rate - full_rate, 0.0);
      if (lo > t || full_cost + module.price * lo / t >= best) continue;
      auto fits = [&](double f) {
        groups.push_back({f, Need(c, budget_s)});
        const bool ok = f > 0 && SomeOrderFits(groups);
        groups.pop_back();
        return ok;
      };
      if (!fits(t)) continue;
      double f = t;
      if (lo > 0 && fits(lo)) {
        f = lo;
      } else {
        double a = lo, b = t;  // fits(a) false (or a == 0), fits(b) true
        for (int it = 0; it < 60; ++it) {
          const double m = 0.5 * (a + b);
          (fits(m) ? b : a) = m;
        }
        f = b;
      }
      best = std::min(best, full_cost + module.price * f / t);
    }
  };
  std::function<void(size_t)> recurse = [&](size_t i) {
    if (i == k) {
      evaluate();
      return;
    }
    for (int n = 0; n <= limit[i]; ++n) {
      count[i] = n;
      recurse(i + 1);
    }
    count[i] = 0;
  };
  recurse(0);
  return best;
}

}  // namespace superserve::testing
