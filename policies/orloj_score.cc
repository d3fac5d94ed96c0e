#include "policies/orloj_score.h"

#include <algorithm>
#include <cmath>

namespace superserve {

OrlojScoreTable OrlojScoreTable::Build(const EmpiricalDistribution& own,
                                       const EmpiricalDistribution& mix, int32_t k,
                                       const BatchTimeModel& model, double mean_batch_us,
                                       const Params& params) {
  OrlojScoreTable t;
  const int32_t n = std::max(1, params.grid_bins);
  // The max of the batch lies in [own.min, max(own.max, mix.max)] and is at
  // least the largest of the minima.
  const double lo = k > 1 ? std::max(own.min(), mix.min()) : own.min();
  const double hi = k > 1 ? std::max(own.max(), mix.max()) : own.max();
  std::vector<double> grid(n + 1);
  for (int32_t i = 0; i <= n; ++i) grid[i] = lo + (hi - lo) * i / n;
  t.edges_.resize(n + 1);
  t.prob_.resize(n);
  for (int32_t i = 0; i <= n; ++i) t.edges_[i] = model.Latency(k, grid[i]);
  double prev = 0;
  for (int32_t i = 0; i < n; ++i) {
    const double c = i + 1 == n ? 1.0 : MaxCdf(own, mix, k, grid[i + 1]);
    t.prob_[i] = std::max(0.0, c - prev);
    prev = std::max(prev, c);
  }
  // The viability cutoff: the batch time's quantile (never below the
  // fastest possible batch).
  double cum = 0;
  t.viable_from_ = t.edges_[0];
  for (int32_t i = 0; i < n; ++i) {
    if (cum + t.prob_[i] >= params.viable_quantile && t.prob_[i] > 0) {
      const double f = std::clamp((params.viable_quantile - cum) / t.prob_[i], 0.0, 1.0);
      t.viable_from_ = t.edges_[i] + f * (t.edges_[i + 1] - t.edges_[i]);
      break;
    }
    cum += t.prob_[i];
  }
  if (!(mean_batch_us > 0)) {  // the expectation of the histogram built above
    mean_batch_us = 0;
    for (int32_t i = 0; i < n; ++i) mean_batch_us += t.prob_[i] * (t.edges_[i] + t.edges_[i + 1]) / 2;
  }
  mean_batch_us = std::max(1e-9, mean_batch_us);
  t.b_ = params.b_per_us > 0 ? params.b_per_us : 1 / (kDelayBatches * mean_batch_us);
  const double K = params.cost / (mean_batch_us * t.b_);
  t.a_.assign(n + 1, 0.0);
  t.beta_.assign(n + 1, 0.0);
  double s = 0;  // sum over the bins entirely feasible
  for (int32_t g = 0; g <= n; ++g) {
    if (g < n) {
      const double w = t.edges_[g + 1] - t.edges_[g];
      const double h = w > 0 ? t.prob_[g] / w : 0;
      t.a_[g] = K * (s - h * std::exp(t.b_ * t.edges_[g]));
      t.beta_[g] = K * h;
      s += h * (std::exp(t.b_ * t.edges_[g + 1]) - std::exp(t.b_ * t.edges_[g]));
    } else {
      t.a_[g] = K * s;
    }
  }
  return t;
}

int32_t OrlojScoreTable::Group(double x) const {
  if (x < viable_from_) return -1;
  const int32_t n = static_cast<int32_t>(prob_.size());
  if (x >= edges_[n]) return n;
  return static_cast<int32_t>(std::upper_bound(edges_.begin(), edges_.end(), x) -
                              edges_.begin()) - 1;
}

double OrlojScoreTable::Floor(int32_t g) const {
  return std::max(viable_from_, edges_[std::min<size_t>(g, edges_.size() - 1)]);
}

double OrlojScoreTable::Alpha(int32_t g, double d) const { return a_[g] * std::exp(-b_ * d); }

double OrlojScoreTable::Score(int32_t g, double d, double t) const {
  return Alpha(g, d) * std::exp(b_ * t) + beta_[g];
}

double OrlojScoreTable::SuccessProbability(double x) const {
  if (x <= edges_.front()) return 0;
  double p = 0;
  for (size_t i = 0; i < prob_.size(); ++i) {
    if (x >= edges_[i + 1]) {
      p += prob_[i];
    } else {
      p += prob_[i] * (x - edges_[i]) / (edges_[i + 1] - edges_[i]);
      break;
    }
  }
  return std::min(1.0, p);
}

}  // namespace superserve
