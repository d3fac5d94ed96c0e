#include "policies/dynamic_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace superserve {
namespace {

// Success probabilities this close count as equal (rounding).
constexpr double kSameProbability = 1e-9;

// What the queues plan with: the lowest threshold's histograms when the
// profile lists thresholds (see exit_thresholds()), else the profile's.
DynamicModelProfile QueueProfile(const DynamicModelProfile& p, bool adaptive_exits) {
  DynamicModelProfile q = p;
  if (adaptive_exits && !p.thresholds.empty()) q.applications = p.thresholds.front().applications;
  return q;
}

}  // namespace

DynamicModelPolicy::DynamicModelPolicy(std::string name, const ModelProfile& profile,
                                       DynamicPolicyOptions options, bool adaptive_exits)
    : options_(options),
      name_(std::move(name)),
      estimator_(QueueProfile(profile.dynamic, adaptive_exits), options.estimator),
      overhead_(options.initial_overhead) {
  model_.c0_us = profile.dynamic.batch_overhead_us;
  model_.c1 = profile.dynamic.per_request_factor;
  batch_sizes_ = profile.batch_sizes;
  dists_ = ProfileDistributions(QueueProfile(profile.dynamic, adaptive_exits));
  for (size_t t = 0; adaptive_exits && t < profile.dynamic.thresholds.size(); ++t) {
    DynamicModelProfile at = profile.dynamic;
    at.applications = profile.dynamic.thresholds[t].applications;
    threshold_dists_.push_back(ProfileDistributions(at));
  }
}

double DynamicModelPolicy::LowestThresholdBatchUs(int32_t k, double probability) const {
  if (threshold_dists_.empty()) return 0;
  k = std::max(k, 1);
  // P(max of k <= x) = F(x)^k: the quantile of the max is F's at p^(1/k).
  const double q = std::pow(probability, 1.0 / k);
  return model_.Latency(k, threshold_dists_.front().back().Quantile(q));
}

int32_t DynamicModelPolicy::PickExitThreshold(const std::vector<int32_t>& dists, double budget_us,
                                              double probability) const {
  if (threshold_dists_.empty()) return -1;
  const double k = static_cast<double>(std::max<size_t>(dists.size(), 1));
  const double max_l = (budget_us - model_.c0_us) / (model_.c1 * k);
  const auto success = [&](int32_t t) {
    if (!(max_l > 0)) return 0.0;
    const auto& d = threshold_dists_[static_cast<size_t>(t)];
    double p = 1.0;
    for (int32_t i : dists) {
      const size_t di = std::min(static_cast<size_t>(std::max(i, 0)), d.size() - 1);
      p *= d[di].Cdf(max_l);
    }
    return p;
  };
  const double lowest = success(0);
  if (lowest < probability) return 0;
  for (int32_t t = exit_thresholds() - 1; t > 0; --t) {
    if (success(t) >= lowest - kSameProbability) return t;
  }
  return 0;
}

int32_t DynamicModelPolicy::DistIndex(const Query& q) const {
  if (q.application >= 0 && q.application < static_cast<int32_t>(app_of_id_.size())) {
    const int32_t a = app_of_id_[q.application];
    if (a >= 0) return a;
  }
  return mix_index();
}

void DynamicModelPolicy::OnApplicationNamed(int32_t id, std::string_view name) {
  if (id < 0) return;
  if (static_cast<size_t>(id) >= app_of_id_.size()) app_of_id_.resize(id + 1, -1);
  app_of_id_[id] = estimator_.Find(std::string(name));
}

void DynamicModelPolicy::OnArrival(const Query& q, Nanos) {
  const int32_t a = DistIndex(q);
  if (a < mix_index()) estimator_.AddArrival(a);
}

void DynamicModelPolicy::OnCompletion(const CompletionTelemetry& t) {
  overhead_samples_.Add(t.overhead);
  overhead_ = overhead_samples_.value();
  // With thresholds, the distributions are the lowest threshold's.
  if (t.exit_threshold_index != (threshold_dists_.empty() ? -1 : 0)) return;
  for (const QueryTelemetry& q : t.queries) {
    Query probe;
    probe.application = q.application;
    const int32_t a = DistIndex(probe);
    if (a < mix_index()) estimator_.AddSample(a, ToMicros(q.exec));
  }
}

bool DynamicModelPolicy::MaybeRefresh(Nanos now) {
  if (refreshed_ && (estimator_.version() == refreshed_version_ ||
                     now - refreshed_at_ < options_.refresh_interval)) {
    return false;
  }
  refreshed_ = true;
  refreshed_version_ = estimator_.version();
  refreshed_at_ = now;
  const size_t n = estimator_.applications();
  std::vector<EmpiricalDistribution> d;
  d.reserve(n + 1);
  for (size_t i = 0; i < n; ++i) d.push_back(estimator_.Distribution(i));
  auto mix = EmpiricalDistribution::Mixture(d, estimator_.Shares());
  d.push_back(mix.ok() ? *mix : d.front());
  dists_ = std::move(d);
  OnDistributionsChanged();
  return true;
}

std::vector<EmpiricalDistribution> ProfileDistributions(const DynamicModelProfile& profile) {
  std::vector<EmpiricalDistribution> d;
  std::vector<double> w;
  for (const ApplicationHistogram& h : profile.applications) {
    auto x = EmpiricalDistribution::FromProfile(h);
    d.push_back(x.ok() ? *x : EmpiricalDistribution::Constant(1));
    w.push_back(std::accumulate(h.counts.begin(), h.counts.end(), 0.0));
  }
  if (d.empty()) d.push_back(EmpiricalDistribution::Constant(1));
  if (w.empty()) w.push_back(1);
  auto mix = EmpiricalDistribution::Mixture(d, w);
  d.push_back(mix.ok() ? *mix : d.front());
  return d;
}

}  // namespace superserve
