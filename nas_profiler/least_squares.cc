#include "nas_profiler/least_squares.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace superserve::nas {

absl::StatusOr<std::vector<double>> SolveLeastSquares(const std::vector<std::vector<double>>& x,
                                                      const std::vector<double>& y,
                                                      const std::vector<bool>& use,
                                                      double ridge, bool nonnegative) {
  if (x.empty() || x.size() != y.size() || x.size() != use.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "least squares: %d rows, %d targets, %d flags", x.size(), y.size(), use.size()));
  }
  const size_t params = x.front().size();
  std::vector<double> lo(params, INFINITY), hi(params, -INFINITY);
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].size() != params) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "least squares: row %d has %d columns, row 0 has %d", i, x[i].size(), params));
    }
    if (!use[i]) continue;
    for (size_t j = 0; j < params; ++j) {
      lo[j] = std::min(lo[j], x[i][j]);
      hi[j] = std::max(hi[j], x[i][j]);
    }
  }
  std::vector<size_t> cols = {0};
  std::vector<double> scale(params, 1.0);
  for (size_t j = 1; j < params; ++j) {
    if (hi[j] - lo[j] > 1e-12 * std::max(1.0, std::abs(hi[j]))) {
      cols.push_back(j);
      scale[j] = 1.0 / std::max(std::abs(lo[j]), std::abs(hi[j]));
    }
  }
  const size_t n = cols.size();
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  for (size_t i = 0; i < x.size(); ++i) {
    if (!use[i]) continue;
    for (size_t r = 0; r < n; ++r) {
      const double xr = x[i][cols[r]] * scale[cols[r]];
      for (size_t c = 0; c < n; ++c) a[r][c] += xr * x[i][cols[c]] * scale[cols[c]];
      a[r][n] += xr * y[i];
    }
  }
  for (size_t r = 1; r < n; ++r) a[r][r] += ridge;
  std::vector<double> weights(params, 0.0);
  if (nonnegative) {
    // Projected coordinate descent: each step minimises the quadratic along
    // one coordinate, then clips it at 0 (the intercept stays free). The
    // objective is convex, so the sweeps converge to the constrained optimum.
    std::vector<double> w(n, 0.0);
    for (size_t c = 0; c < n; ++c) {
      if (a[c][c] < 1e-12) return absl::InvalidArgumentError("least squares: singular system");
    }
    for (int sweep = 0; sweep < 100000; ++sweep) {
      double change = 0;
      for (size_t c = 0; c < n; ++c) {
        double r = a[c][n];
        for (size_t k = 0; k < n; ++k) {
          if (k != c) r -= a[c][k] * w[k];
        }
        double v = r / a[c][c];
        if (c > 0) v = std::max(0.0, v);
        change = std::max(change, std::abs(v - w[c]));
        w[c] = v;
      }
      if (change < 1e-12) break;
    }
    for (size_t c = 0; c < n; ++c) weights[cols[c]] = w[c] * scale[cols[c]];
    return weights;
  }
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-12) {
      return absl::InvalidArgumentError("least squares: singular system");
    }
    std::swap(a[c], a[pivot]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  for (size_t c = 0; c < n; ++c) weights[cols[c]] = a[c][n] / a[c][c] * scale[cols[c]];
  return weights;
}

double Dot(const std::vector<double>& w, const std::vector<double>& x) {
  double s = 0;
  for (size_t j = 0; j < w.size() && j < x.size(); ++j) s += w[j] * x[j];
  return s;
}

}  // namespace superserve::nas
