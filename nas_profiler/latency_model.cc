#include "nas_profiler/latency_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace superserve::nas {

namespace {

constexpr int kParams = 4;
using Row = std::array<double, kParams>;

Row Features(const ArchitectureCost& c) { return {1.0, c.macs, c.activations, c.conv_layers}; }

// Solves the normal equations of the selected rows with features scaled to
// unit range; columns that are constant over the rows get weight 0.
bool Solve(const std::vector<Row>& x, const std::vector<double>& y, const std::vector<bool>& use,
           double* weights) {
  Row lo, hi;
  lo.fill(INFINITY);
  hi.fill(-INFINITY);
  for (size_t i = 0; i < x.size(); ++i) {
    if (!use[i]) continue;
    for (int j = 0; j < kParams; ++j) {
      lo[j] = std::min(lo[j], x[i][j]);
      hi[j] = std::max(hi[j], x[i][j]);
    }
  }
  std::vector<int> cols = {0};
  Row scale;
  scale.fill(1.0);
  for (int j = 1; j < kParams; ++j) {
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
  // Gaussian elimination with partial pivoting.
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-12) return false;
    std::swap(a[c], a[pivot]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  for (int j = 0; j < kParams; ++j) weights[j] = 0;
  for (size_t c = 0; c < n; ++c) weights[cols[c]] = a[c][n] / a[c][c] * scale[cols[c]];
  return true;
}

double Dot(const double* w, const Row& x) {
  double s = 0;
  for (int j = 0; j < kParams; ++j) s += w[j] * x[j];
  return s;
}

}  // namespace

absl::StatusOr<FittedLatencyModel> FittedLatencyModel::Fit(
    const std::vector<ArchitectureCost>& costs, const std::vector<double>& latency_us,
    double outlier_mads) {
  if (costs.size() != latency_us.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "latency model: %d cost rows but %d latencies", costs.size(), latency_us.size()));
  }
  if (costs.size() < 8) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "latency model: needs at least 8 measured architectures, got %d", costs.size()));
  }
  std::vector<Row> x;
  for (const ArchitectureCost& c : costs) x.push_back(Features(c));
  std::vector<bool> use(x.size(), true);
  FittedLatencyModel model;
  if (!Solve(x, latency_us, use, model.weights_)) {
    return absl::InvalidArgumentError("latency model: singular system");
  }
  std::vector<double> residual(x.size());
  for (size_t i = 0; i < x.size(); ++i) residual[i] = latency_us[i] - Dot(model.weights_, x[i]);
  std::vector<double> abs_residual;
  for (double r : residual) abs_residual.push_back(std::abs(r));
  std::nth_element(abs_residual.begin(), abs_residual.begin() + abs_residual.size() / 2,
                   abs_residual.end());
  const double mad = abs_residual[abs_residual.size() / 2];
  size_t kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    use[i] = std::abs(residual[i]) <= outlier_mads * mad || mad == 0;
    kept += use[i];
  }
  model.outliers_dropped_ = static_cast<int>(x.size() - kept);
  if (model.outliers_dropped_ > 0 && kept >= 8) {
    if (!Solve(x, latency_us, use, model.weights_)) {
      return absl::InvalidArgumentError("latency model: singular system after dropping outliers");
    }
  } else {
    std::fill(use.begin(), use.end(), true);
    model.outliers_dropped_ = 0;
  }
  double mean = 0;
  for (size_t i = 0; i < x.size(); ++i) mean += use[i] ? latency_us[i] : 0;
  mean /= static_cast<double>(std::count(use.begin(), use.end(), true));
  double total = 0, unexplained = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!use[i]) continue;
    const double r = latency_us[i] - Dot(model.weights_, x[i]);
    total += (latency_us[i] - mean) * (latency_us[i] - mean);
    unexplained += r * r;
  }
  model.r_squared_ = total > 0 ? 1.0 - unexplained / total : 1.0;
  return model;
}

double FittedLatencyModel::PredictMicros(const ArchitectureCost& cost) const {
  return Dot(weights_, Features(cost));
}

std::string FittedLatencyModel::DebugString() const {
  return absl::StrFormat(
      "latency_us = %.1f + %.3g*macs + %.3g*activations + %.1f*conv_layers (R^2 %.3f, %d "
      "outliers dropped)",
      weights_[0], weights_[1], weights_[2], weights_[3], r_squared_, outliers_dropped_);
}

}  // namespace superserve::nas
