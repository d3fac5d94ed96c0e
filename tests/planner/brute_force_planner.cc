#include "tests/planner/brute_force_planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "planner/module_plan.h"

namespace superserve::testing {

double BruteForceModuleCost(const Module& module, double rate, double budget_s) {
  // Throughput-cost order (one price per module: by throughput), ties to the
  // smaller batch, as the planner orders them.
  std::vector<BatchConfig> configs = module.configs;
  std::stable_sort(configs.begin(), configs.end(), [](const BatchConfig& a, const BatchConfig& b) {
    if (a.throughput() != b.throughput()) return a.throughput() > b.throughput();
    return a.batch < b.batch;
  });
  const size_t k = configs.size();
  std::vector<int> limit(k);
  for (size_t i = 0; i < k; ++i) {
    // Enough machines for the rate, or for the collection rate the batch
    // needs (b / (budget - d)) when dummies raise the rate to it.
    const BatchConfig& c = configs[i];
    double most = rate;
    if (budget_s > c.duration_s) most = std::max(most, c.batch / (budget_s - c.duration_s));
    limit[i] = static_cast<int>(std::ceil(most / c.throughput())) + 1;
  }
  std::vector<int> count(k, 0);
  // Every group in dispatch order meets the budget when it collects at its
  // own rate plus all later groups' (Theorem 1).
  auto fits = [&](int partial_config, double partial_rate) {
    double after = 0;
    for (size_t i = k; i-- > 0;) {
      const BatchConfig& c = configs[i];
      if (static_cast<int>(i) == partial_config) {
        after += partial_rate;
        if (!WithinBudget(GroupWorstLatency(Dispatch::kBatchAware, c, after, 0), budget_s)) {
          return false;
        }
      }
      if (count[i] > 0) {
        after += count[i] * c.throughput();
        if (!WithinBudget(GroupWorstLatency(Dispatch::kBatchAware, c, after, 0), budget_s)) {
          return false;
        }
      }
    }
    return true;
  };
  double best = std::numeric_limits<double>::infinity();
  auto evaluate = [&]() {
    double full_rate = 0, full_cost = 0;
    for (size_t i = 0; i < k; ++i) {
      full_rate += count[i] * configs[i].throughput();
      full_cost += count[i] * module.price;
    }
    if (full_cost >= best) return;
    if (full_rate >= rate * (1 - 1e-12) && fits(-1, 0)) best = full_cost;
    for (size_t p = 0; p < k; ++p) {
      const double t = configs[p].throughput();
      const double lo = std::max(rate - full_rate, 0.0);
      if (lo > t || full_cost + module.price * lo / t >= best) continue;
      const int pc = static_cast<int>(p);
      if (!fits(pc, t)) continue;
      double f = t;
      if (lo > 0 && fits(pc, lo)) {
        f = lo;
      } else {
        double a = lo, b = t;  // fits(a) is false (or a is 0), fits(b) is true
        for (int it = 0; it < 60; ++it) {
          const double m = 0.5 * (a + b);
          (fits(pc, m) ? b : a) = m;
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
