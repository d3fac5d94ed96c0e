#include "policies/dynamic_policy.h"

#include <numeric>

namespace superserve {

DynamicModelPolicy::DynamicModelPolicy(std::string name, const ModelProfile& profile,
                                       DynamicPolicyOptions options)
    : options_(options),
      name_(std::move(name)),
      estimator_(profile.dynamic, options.estimator),
      overhead_(options.initial_overhead) {
  model_.c0_us = profile.dynamic.batch_overhead_us;
  model_.c1 = profile.dynamic.per_request_factor;
  batch_sizes_ = profile.batch_sizes;
  dists_ = ProfileDistributions(profile.dynamic);
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
