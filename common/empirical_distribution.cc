#include "common/empirical_distribution.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/model_profile.h"

namespace superserve {

absl::StatusOr<EmpiricalDistribution> EmpiricalDistribution::FromHistogram(
    absl::Span<const double> edges, absl::Span<const double> counts) {
  if (counts.empty() || edges.size() != counts.size() + 1) {
    return absl::InvalidArgumentError(absl::StrCat("histogram: ", edges.size(), " edges for ",
                                                   counts.size(), " counts (need counts + 1)"));
  }
  double sum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (!std::isfinite(counts[i]) || counts[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("histogram: counts[", i, "] = ", counts[i]));
    }
    sum += counts[i];
  }
  for (size_t i = 0; i < edges.size(); ++i) {
    if (!std::isfinite(edges[i]) || (i > 0 && edges[i] <= edges[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram: edges must be finite and strictly increasing (edge ", i, ")"));
    }
  }
  if (!(sum > 0)) return absl::InvalidArgumentError("histogram: counts sum to 0");
  EmpiricalDistribution d;
  d.edges_.assign(edges.begin(), edges.end());
  d.prob_.reserve(counts.size());
  for (double c : counts) d.prob_.push_back(c / sum);
  d.Finish();
  return d;
}

absl::StatusOr<EmpiricalDistribution> EmpiricalDistribution::FromProfile(
    const ApplicationHistogram& h) {
  auto d = FromHistogram(h.bin_edges_us, h.counts);
  if (!d.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("application \"", h.application, "\": ", d.status().message()));
  }
  return d;
}

absl::StatusOr<EmpiricalDistribution> EmpiricalDistribution::FromSamples(
    absl::Span<const double> samples, absl::Span<const double> edges) {
  if (samples.empty()) return absl::InvalidArgumentError("histogram: no samples");
  if (edges.size() < 2) return absl::InvalidArgumentError("histogram: need >= 2 edges");
  std::vector<double> counts(edges.size() - 1, 0.0);
  for (double s : samples) {
    size_t i = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), s) -
                                   edges.begin());
    i = std::clamp<size_t>(i, 1, counts.size()) - 1;
    counts[i] += 1;
  }
  return FromHistogram(edges, counts);
}

EmpiricalDistribution EmpiricalDistribution::Constant(double value) {
  EmpiricalDistribution d;
  const double w = 1e-9 * std::max(1.0, std::abs(value));
  d.edges_ = {value, value + w};
  d.prob_ = {1.0};
  d.Finish();
  return d;
}

absl::StatusOr<EmpiricalDistribution> EmpiricalDistribution::Mixture(
    absl::Span<const EmpiricalDistribution> parts, absl::Span<const double> weights) {
  if (parts.empty() || parts.size() != weights.size()) {
    return absl::InvalidArgumentError("mixture: need one weight per part and >= 1 part");
  }
  double wsum = 0;
  for (double w : weights) {
    if (!std::isfinite(w) || w < 0) return absl::InvalidArgumentError("mixture: weight < 0");
    wsum += w;
  }
  if (!(wsum > 0)) return absl::InvalidArgumentError("mixture: weights sum to 0");
  std::vector<double> edges;
  for (const auto& p : parts) edges.insert(edges.end(), p.edges_.begin(), p.edges_.end());
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<double> counts(edges.size() - 1, 0.0);
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    for (size_t k = 0; k < parts.size(); ++k) {
      counts[i] += weights[k] / wsum * (parts[k].Cdf(edges[i + 1]) - parts[k].Cdf(edges[i]));
    }
    counts[i] = std::max(0.0, counts[i]);
  }
  return FromHistogram(edges, counts);
}

void EmpiricalDistribution::Finish() {
  cum_.assign(edges_.size(), 0.0);
  mean_ = 0;
  for (size_t i = 0; i < prob_.size(); ++i) {
    cum_[i + 1] = cum_[i] + prob_[i];
    mean_ += prob_[i] * 0.5 * (edges_[i] + edges_[i + 1]);
  }
  cum_.back() = 1.0;
}

double EmpiricalDistribution::Cdf(double x) const {
  if (x <= edges_.front()) return 0;
  if (x >= edges_.back()) return 1;
  size_t i = static_cast<size_t>(std::upper_bound(edges_.begin(), edges_.end(), x) -
                                 edges_.begin()) - 1;
  const double f = (x - edges_[i]) / (edges_[i + 1] - edges_[i]);
  return cum_[i] + f * prob_[i];
}

double EmpiricalDistribution::Quantile(double p) const {
  p = std::clamp(p, 0.0, 1.0);
  // First bin whose cumulative end reaches p (skipping empty bins).
  size_t i = static_cast<size_t>(std::lower_bound(cum_.begin() + 1, cum_.end(), p) -
                                 cum_.begin()) - 1;
  i = std::min(i, prob_.size() - 1);
  while (i + 1 < prob_.size() && prob_[i] == 0) ++i;
  if (prob_[i] == 0) return edges_[i + 1];
  const double f = std::clamp((p - cum_[i]) / prob_[i], 0.0, 1.0);
  return edges_[i] + f * (edges_[i + 1] - edges_[i]);
}

double EmpiricalDistribution::Sample(std::mt19937_64& rng) const {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  return Quantile(u(rng));
}

}  // namespace superserve
