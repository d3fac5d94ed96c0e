#ifndef SUPERSERVE_NAS_PROFILER_LEAST_SQUARES_H_
#define SUPERSERVE_NAS_PROFILER_LEAST_SQUARES_H_

// Small dense (ridge) least squares for the search's fitted models
// (latency_model.h, accuracy_model.h). Torch-free.

#include <vector>

#include "absl/status/statusor.h"

namespace superserve::nas {

// Weights w minimising sum over the rows i with use[i] of (y_i - w.x_i)^2 +
// ridge * |w[1:]|^2, column 0 being the intercept (never penalised). Columns
// are scaled to unit range first (the ridge then treats them alike) and
// columns that are constant over the used rows get weight 0 instead of making
// the system singular. Normal equations, Gaussian elimination with partial
// pivoting: meant for tens of columns and thousands of rows. With
// `nonnegative`, every weight but the intercept is constrained to >= 0
// (projected coordinate descent on the same normal equations), for models
// whose features should only ever add (a larger choice never predicts less).
absl::StatusOr<std::vector<double>> SolveLeastSquares(const std::vector<std::vector<double>>& x,
                                                      const std::vector<double>& y,
                                                      const std::vector<bool>& use,
                                                      double ridge = 0.0,
                                                      bool nonnegative = false);

double Dot(const std::vector<double>& w, const std::vector<double>& x);

}  // namespace superserve::nas

#endif  // SUPERSERVE_NAS_PROFILER_LEAST_SQUARES_H_
