#ifndef SUPERSERVE_COMMON_EMPIRICAL_DISTRIBUTION_H_
#define SUPERSERVE_COMMON_EMPIRICAL_DISTRIBUTION_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace superserve {

struct ApplicationHistogram;

// An execution-time distribution given by a histogram: probability mass
// spread uniformly inside each bin [edges[i], edges[i+1]). Values are in
// whatever unit the edges are (profiles use microseconds). Immutable once
// built; cheap to copy.
class EmpiricalDistribution {
 public:
  // edges: strictly increasing, counts.size() + 1 entries; counts >= 0 with a
  // positive sum (normalised here).
  static absl::StatusOr<EmpiricalDistribution> FromHistogram(absl::Span<const double> edges,
                                                             absl::Span<const double> counts);
  static absl::StatusOr<EmpiricalDistribution> FromProfile(const ApplicationHistogram& h);
  // Samples binned on `edges`; samples outside [edges.front(), edges.back())
  // are clamped into the first / last bin. Needs at least one sample.
  static absl::StatusOr<EmpiricalDistribution> FromSamples(absl::Span<const double> samples,
                                                           absl::Span<const double> edges);
  // A point mass at `value` (one bin of width 1e-9 * max(1, value)): static
  // models and tests.
  static EmpiricalDistribution Constant(double value);
  // Weighted mixture of distributions (weights >= 0, positive sum) on the
  // union of their edges.
  static absl::StatusOr<EmpiricalDistribution> Mixture(
      absl::Span<const EmpiricalDistribution> parts, absl::Span<const double> weights);

  // P(X <= x): 0 below the first edge, 1 from the last edge on, linear inside
  // a bin.
  double Cdf(double x) const;
  // Smallest x with Cdf(x) >= p (p clamped to [0, 1]).
  double Quantile(double p) const;
  double Mean() const { return mean_; }
  double min() const { return edges_.front(); }
  double max() const { return edges_.back(); }
  // One draw: a bin by its probability, then uniform inside it.
  double Sample(std::mt19937_64& rng) const;

  const std::vector<double>& edges() const { return edges_; }
  // Probability of each bin (sums to 1).
  const std::vector<double>& probabilities() const { return prob_; }

 private:
  EmpiricalDistribution() = default;
  void Finish();  // cumulative table and mean from edges_ and prob_

  std::vector<double> edges_;
  std::vector<double> prob_;
  std::vector<double> cum_;  // cum_[i] = P(X < edges_[i]); size edges_.size()
  double mean_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_EMPIRICAL_DISTRIBUTION_H_
