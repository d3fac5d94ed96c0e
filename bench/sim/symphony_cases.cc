#include "bench/sim/symphony_cases.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/sim/profile_generators.h"
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

ModelProfile PowersOfTwoOnly(const ModelProfile& profile) {
  ModelProfile p = profile;
  p.batch_sizes.clear();
  for (SubnetProfile& s : p.subnets) s.latency.clear();
  for (size_t i = 0; i < profile.batch_sizes.size(); ++i) {
    const int32_t b = profile.batch_sizes[i];
    if ((b & (b - 1)) != 0) continue;
    p.batch_sizes.push_back(b);
    for (size_t s = 0; s < p.subnets.size(); ++s) {
      p.subnets[s].latency.push_back(profile.subnets[s].latency[i]);
    }
  }
  return p;
}

LinearFit FitLinear(const ModelProfile& profile) {
  LinearFit f;
  if (profile.subnets.empty()) return f;
  const SubnetProfile& s = profile.subnets[0];
  if (s.linear.has_value()) {
    return LinearFit{s.linear->alpha_us / 1e3, s.linear->beta_us / 1e3};
  }
  const size_t n = std::min(profile.batch_sizes.size(), s.latency.size());
  double mb = 0, ml = 0;
  for (size_t i = 0; i < n; ++i) {
    mb += profile.batch_sizes[i];
    ml += ToMillis(s.latency[i]);
  }
  if (n == 0) return f;
  mb /= n;
  ml /= n;
  double cov = 0, var = 0;
  for (size_t i = 0; i < n; ++i) {
    cov += (profile.batch_sizes[i] - mb) * (ToMillis(s.latency[i]) - ml);
    var += (profile.batch_sizes[i] - mb) * (profile.batch_sizes[i] - mb);
  }
  f.alpha_ms = var > 0 ? cov / var : 0;
  f.beta_ms = ml - f.alpha_ms * mb;
  return f;
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
  if (!std::isfinite(hint)) {
    return absl::InvalidArgumentError(
        absl::StrCat("goodput search: hint ", hint, " q/s is not finite"));
  }
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
  // Each step halves [lo, hi]: from lo > 0, 0.4 % of hi takes about 8 steps.
  // The cap ends a search whose target no rate meets (lo stays 0 and hi would
  // halve ~1100 times, down to a rate of 0, which the trace rejects).
  for (int step = 0; step < kMaxGoodputSteps && hi - lo > 0.004 * hi; ++step) {
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

std::vector<SingleSubnetCase> SingleSubnetCases(const Workload& base) {
  std::vector<SingleSubnetCase> cases;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed * 104729 + 3);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const double alpha = 0.2 + 1.3 * u(rng);            // ms per query
    const double ratio = 4.0 * std::pow(10.0, u(rng));  // β/α in [4, 40]
    const bool padded = u(rng) < 0.5;
    SingleSubnetCase c;
    c.workload = base;
    if (seed <= 6) {
      c.workload.profile =
          LinearProfile(absl::StrCat("single", seed), alpha, ratio * alpha, 64, padded);
      c.label = absl::StrFormat("ℓ(b) = %.2f·b + %.2f ms%s", alpha, ratio * alpha,
                                padded ? ", batches 2^k" : "");
      c.padded = padded;
    } else {
      const ProfileShape shape = seed <= 9 ? ProfileShape::kCpu : ProfileShape::kGpu;
      c.workload.profile = ShapedProfile(shape, 1, seed);
      c.label = absl::StrCat(ProfileShapeName(shape), "-shaped");
      c.padded = true;
    }
    const ModelProfile& p = c.workload.profile;
    c.workload.sim.workers = u(rng) < 0.5 ? 4 : 8;
    const double slo_factor = 1.5 + 1.5 * u(rng);
    c.workload.slo = Millis(slo_factor * ToMillis(p.subnets[0].latency[p.BatchIndex(16)]));
    c.workload.sim.noise_cv = 0.03;
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace superserve
