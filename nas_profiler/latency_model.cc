#include "nas_profiler/latency_model.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "nas_profiler/least_squares.h"

namespace superserve::nas {

namespace {

std::vector<double> Features(const ArchitectureCost& c) {
  return {1.0, c.macs, c.activations, c.conv_layers};
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
  std::vector<std::vector<double>> x;
  for (const ArchitectureCost& c : costs) x.push_back(Features(c));
  std::vector<bool> use(x.size(), true);
  FittedLatencyModel model;
  auto weights = SolveLeastSquares(x, latency_us, use);
  if (!weights.ok()) return weights.status();
  model.weights_ = *std::move(weights);
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
    weights = SolveLeastSquares(x, latency_us, use);
    if (!weights.ok()) return weights.status();
    model.weights_ = *std::move(weights);
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
