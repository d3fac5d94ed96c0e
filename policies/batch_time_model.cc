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

double ExpectedMax(const EmpiricalDistribution& d, int32_t k) {
  // E[M] = min + integral over [min, max] of (1 - F(x)^k) dx (M >= min).
  // Inside bin i, F rises linearly from a to c: the integral of F^k over the
  // bin is w * (c^{k+1} - a^{k+1}) / ((k + 1) (c - a)).
  const auto& e = d.edges();
  const auto& p = d.probabilities();
  double sum = e.front(), a = 0;
  for (size_t i = 0; i + 1 < e.size(); ++i) {
    const double w = e[i + 1] - e[i], c = std::min(1.0, a + p[i]);
    const double fk = c > a ? (std::pow(c, k + 1) - std::pow(a, k + 1)) / ((k + 1) * (c - a))
                            : std::pow(a, k);
    sum += (1 - fk) * w;
    a = c;
  }
  return sum;
}

}  // namespace superserve
