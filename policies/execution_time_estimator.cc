#include "policies/execution_time_estimator.h"

#include <algorithm>
#include <numeric>

namespace superserve {

ExecutionTimeEstimator::ExecutionTimeEstimator(const DynamicModelProfile& profile, Options options)
    : options_(options) {
  options_.window = std::max<size_t>(1, options_.window);
  options_.min_samples = std::clamp<size_t>(options_.min_samples, 1, options_.window);
  options_.bins = std::max(1, options_.bins);
  for (const ApplicationHistogram& h : profile.applications) {
    auto d = EmpiricalDistribution::FromProfile(h);
    // The profile was validated on load; a bad one falls back to a point mass.
    EmpiricalDistribution prior =
        d.ok() ? *d : EmpiricalDistribution::Constant(h.bin_edges_us.empty() ? 1.0
                                                                              : h.bin_edges_us[0]);
    apps_.push_back(App{h.application, prior, {}, 0, false, prior});
    prior_share_.push_back(std::accumulate(h.counts.begin(), h.counts.end(), 0.0));
  }
  arrival_counts_.assign(apps_.size(), 0);
}

int32_t ExecutionTimeEstimator::Find(const std::string& name) const {
  for (size_t i = 0; i < apps_.size(); ++i) {
    if (apps_[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

void ExecutionTimeEstimator::AddSample(size_t app, double exec_us) {
  if (app >= apps_.size() || !(exec_us >= 0)) return;
  App& a = apps_[app];
  if (a.ring.size() < options_.window) {
    a.ring.push_back(exec_us);
  } else {
    a.ring[a.next] = exec_us;
    a.next = (a.next + 1) % options_.window;
  }
  if (a.ring.size() >= options_.min_samples) {
    a.dirty = true;
    ++version_;
  }
}

void ExecutionTimeEstimator::AddArrival(size_t app) {
  if (app >= apps_.size()) return;
  const size_t cap = std::max<size_t>(1, options_.share_window);
  if (arrivals_.size() < cap) {
    arrivals_.push_back(static_cast<int32_t>(app));
  } else {
    --arrival_counts_[arrivals_[arrivals_next_]];
    arrivals_[arrivals_next_] = static_cast<int32_t>(app);
    arrivals_next_ = (arrivals_next_ + 1) % cap;
  }
  ++arrival_counts_[app];
  ++version_;
}

const EmpiricalDistribution& ExecutionTimeEstimator::Distribution(size_t app) {
  App& a = apps_[app];
  if (a.dirty) {
    a.dirty = false;
    auto [lo, hi] = std::minmax_element(a.ring.begin(), a.ring.end());
    double low = *lo, high = *hi;
    if (high <= low) high = low + std::max(1e-3, 1e-6 * low);
    high += (high - low) * 1e-9;  // the maximum inside the last bin
    std::vector<double> edges(static_cast<size_t>(options_.bins) + 1);
    for (size_t i = 0; i < edges.size(); ++i) {
      edges[i] = low + (high - low) * static_cast<double>(i) / options_.bins;
    }
    auto d = EmpiricalDistribution::FromSamples(a.ring, edges);
    if (d.ok()) a.current = *std::move(d);
  }
  return a.current;
}

std::vector<double> ExecutionTimeEstimator::Shares() const {
  std::vector<double> s(apps_.size(), 0.0);
  double total = 0;
  if (!arrivals_.empty()) {
    for (size_t i = 0; i < s.size(); ++i) total += (s[i] = static_cast<double>(arrival_counts_[i]));
  } else {
    for (size_t i = 0; i < s.size(); ++i) total += (s[i] = prior_share_[i]);
  }
  if (!(total > 0)) {
    std::fill(s.begin(), s.end(), 1.0);
    total = static_cast<double>(s.size());
  }
  for (double& x : s) x /= total;
  return s;
}

}  // namespace superserve
