#include "nas_profiler/accuracy_model.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "nas_profiler/least_squares.h"

namespace superserve::nas {

namespace {

// Thermometer features of `value` among sorted `choices`: one per choice
// above the smallest, 1 when value reaches it (0 for all when !active).
template <typename T>
void Thermometer(const std::vector<T>& choices, T value, bool active, std::vector<double>& out) {
  for (size_t k = 1; k < choices.size(); ++k) {
    out.push_back(active && value >= choices[k] - static_cast<T>(1e-6) ? 1.0 : 0.0);
  }
}

}  // namespace

std::vector<double> FittedAccuracyModel::Encode(const models::OfaResNetConfig& config,
                                                const ControlTuple& architecture) {
  std::vector<double> f = {1.0};
  for (int32_t depth : architecture.depths) Thermometer(config.depth_choices, depth, true, f);
  for (float width : architecture.width_multipliers) {
    Thermometer(config.width_multiplier_choices, width, true, f);
  }
  const models::ArchitectureShape shape = models::ShapeOf(config, architecture);
  float narrowest_expand = config.expand_ratio_choices.back();
  for (size_t b = 0; b < architecture.expand_ratios.size(); ++b) {
    const bool active = b < shape.blocks.size() && shape.blocks[b].active;
    Thermometer(config.expand_ratio_choices, architecture.expand_ratios[b], active, f);
    if (active) narrowest_expand = std::min(narrowest_expand, architecture.expand_ratios[b]);
  }
  // The bottleneck: the narrowest layer limits the whole network more than
  // the sum of per-layer effects says (widths and expand ratios).
  float narrowest_width = config.width_multiplier_choices.back();
  for (float width : architecture.width_multipliers) {
    narrowest_width = std::min(narrowest_width, width);
  }
  Thermometer(config.width_multiplier_choices, narrowest_width, true, f);
  Thermometer(config.expand_ratio_choices, narrowest_expand, true, f);
  return f;
}

absl::StatusOr<FittedAccuracyModel> FittedAccuracyModel::Fit(
    const models::OfaResNetConfig& config, const std::vector<ControlTuple>& architectures,
    const std::vector<double>& accuracy, double ridge, bool monotone) {
  if (architectures.size() != accuracy.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "accuracy model: %d architectures but %d accuracies", architectures.size(),
        accuracy.size()));
  }
  std::vector<std::vector<double>> x;
  for (const ControlTuple& a : architectures) x.push_back(Encode(config, a));
  const size_t features = Encode(config, models::LargestArchitecture(config)).size();
  if (x.size() < features) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "accuracy model: needs at least %d measured architectures (one per feature), got %d",
        features, x.size()));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].size() != features) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "accuracy model: architecture %d does not match the configuration's shape", i));
    }
  }
  auto weights =
      SolveLeastSquares(x, accuracy, std::vector<bool>(x.size(), true), ridge, monotone);
  if (!weights.ok()) return weights.status();
  FittedAccuracyModel model;
  model.config_ = config;
  model.weights_ = *std::move(weights);
  double squares = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = accuracy[i] - Dot(model.weights_, x[i]);
    squares += r * r;
  }
  model.rmse_ = std::sqrt(squares / static_cast<double>(x.size()));
  model.points_ = x.size();
  model.monotone_ = monotone;
  return model;
}

double FittedAccuracyModel::Predict(const ControlTuple& architecture) const {
  return Dot(weights_, Encode(config_, architecture));
}

std::string FittedAccuracyModel::DebugString() const {
  return absl::StrFormat(
      "accuracy model: %sridge regression on %d choice features over %d architectures, "
      "residual RMS %.2f points, largest %.2f %%, smallest %.2f %%",
      monotone_ ? "monotone " : "", weights_.size() - 1, points_, rmse_, Predict(models::LargestArchitecture(config_)),
      Predict(models::SmallestArchitecture(config_)));
}

}  // namespace superserve::nas
