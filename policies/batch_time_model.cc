#include "policies/batch_time_model.h"

#include <cmath>

namespace superserve {

double MaxCdf(absl::Span<const EmpiricalDistribution* const> parts, double x) {
  double p = 1;
  for (const EmpiricalDistribution* d : parts) p *= d->Cdf(x);
  return p;
}

double MaxCdf(const EmpiricalDistribution& own, const EmpiricalDistribution& others, int32_t k,
              double x) {
  return own.Cdf(x) * std::pow(others.Cdf(x), k - 1);
}

double ExpectedMax(const EmpiricalDistribution& d, int32_t k, int32_t steps) {
  // E[M] = min + integral over [min, max] of (1 - F(x)^k) dx (M >= min).
  const auto& e = d.edges();
  double sum = e.front();
  for (size_t i = 0; i + 1 < e.size(); ++i) {
    const double w = (e[i + 1] - e[i]) / steps;
    for (int32_t s = 0; s < steps; ++s) {  // midpoint rule inside the bin
      const double x = e[i] + (s + 0.5) * w;
      sum += (1 - std::pow(d.Cdf(x), k)) * w;
    }
  }
  return sum;
}

}  // namespace superserve
