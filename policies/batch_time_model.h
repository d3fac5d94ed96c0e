#ifndef SUPERSERVE_POLICIES_BATCH_TIME_MODEL_H_
#define SUPERSERVE_POLICIES_BATCH_TIME_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/empirical_distribution.h"

namespace superserve {

// Orloj Eq. (3)-(4): a batch of k requests of a dynamic DNN is padded to its
// longest member and takes c0 + c1 * k * max(l_i) (all in microseconds).
struct BatchTimeModel {
  double c0_us = 0;
  double c1 = 1;
  double Latency(int32_t k, double max_l_us) const { return c0_us + c1 * k * max_l_us; }
};

// P(max_i L_i <= x) for independent L_i: the product of the per-request
// CDFs. It equals Orloj's Eq. (8) (Özbey's order statistic) without its
// alternating sum, so it has no cancellation error (DESIGN.md).
double MaxCdf(absl::Span<const EmpiricalDistribution* const> parts, double x);

// The same for one request of `own` batched with k - 1 requests of `others`:
// own.Cdf(x) * others.Cdf(x)^(k-1).
double MaxCdf(const EmpiricalDistribution& own, const EmpiricalDistribution& others, int32_t k,
              double x);

// E[max of k independent draws from d] = min + integral of 1 - F(x)^k,
// exact for the histogram's piecewise-linear CDF.
double ExpectedMax(const EmpiricalDistribution& d, int32_t k);

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_BATCH_TIME_MODEL_H_
