#include "bench/sim/symphony_cases.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "bench/sim/trace_generators.h"

namespace superserve {

ModelProfile LinearProfile(const std::string& name, double alpha_ms, double beta_ms,
                           int32_t max_batch, bool powers_of_two) {
  ModelProfile p;
  p.model = name;
  p.family = "linear";
  SubnetProfile s;
  s.id = 0;
  s.accuracy = 76;
  for (int32_t b = 1; b <= max_batch; b = powers_of_two ? 2 * b : b + 1) {
    p.batch_sizes.push_back(b);
    s.latency.push_back(Millis(alpha_ms * b + beta_ms));
  }
  p.subnets.push_back(s);
  return p;
}

namespace {

AnalyticBound Bound(double alpha_ms, double beta_ms, double budget_ms, int32_t workers) {
  AnalyticBound a;
  a.batch = std::max<int32_t>(0, static_cast<int32_t>(std::floor((budget_ms - beta_ms) / alpha_ms)));
  a.throughput = workers * a.batch / ((alpha_ms * a.batch + beta_ms) / 1000.0);
  return a;
}

}  // namespace

AnalyticBound StaggeredBound(double alpha_ms, double beta_ms, double slo_ms, int32_t workers) {
  return Bound(alpha_ms, beta_ms, slo_ms / (1.0 + 1.0 / workers), workers);
}

AnalyticBound UncoordinatedBound(double alpha_ms, double beta_ms, double slo_ms,
                                 int32_t workers) {
  return Bound(alpha_ms, beta_ms, slo_ms / 2.0, workers);
}

absl::StatusOr<SimulationResult> RunWorkload(const Workload& w, double rate,
                                             const PolicyBuilder& policy) {
  MultiModelTraceOptions t;
  t.models = w.models;
  t.rate = rate;
  t.cv2 = w.cv2;
  t.zipf_s = w.zipf_s;
  t.duration = w.duration;
  t.seed = w.seed;
  auto trace = MultiModelArrivals(t);
  if (!trace.ok()) return trace.status();
  std::vector<ModelProfile> profiles;
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<SimulatedModel> models;
  profiles.reserve(w.models);
  for (int32_t m = 0; m < w.models; ++m) {
    profiles.push_back(w.profile);
    profiles.back().model = trace->model_names[m];
  }
  for (int32_t m = 0; m < w.models; ++m) {
    policies.push_back(policy(profiles[m]));
    models.push_back({&profiles[m], policies.back().get(), w.slo});
  }
  SimulatorOptions o = w.sim;
  o.slo = w.slo;
  o.seed = w.seed;
  return SimulateModels(models, trace->arrivals, trace->model, o);
}

absl::StatusOr<double> Goodput(const Workload& w, const PolicyBuilder& policy, double hint,
                               double target, SimulationResult* at_goodput) {
  double lo = 0, hi = std::max(1.0, hint);
  SimulationResult best;
  // Find a failing upper end.
  for (int i = 0; i < 8; ++i) {
    auto r = RunWorkload(w, hi, policy);
    if (!r.ok()) return r.status();
    if (r->slo_attainment() < target) break;
    lo = hi;
    best = *std::move(r);
    hi *= 1.5;
  }
  while (hi - lo > 0.004 * hi) {
    const double mid = (lo + hi) / 2;
    auto r = RunWorkload(w, mid, policy);
    if (!r.ok()) return r.status();
    if (r->slo_attainment() >= target) {
      lo = mid;
      best = *std::move(r);
    } else {
      hi = mid;
    }
  }
  if (at_goodput != nullptr) *at_goodput = std::move(best);
  return lo;
}

}  // namespace superserve
