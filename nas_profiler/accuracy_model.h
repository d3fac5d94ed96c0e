#ifndef SUPERSERVE_NAS_PROFILER_ACCURACY_MODEL_H_
#define SUPERSERVE_NAS_PROFILER_ACCURACY_MODEL_H_

// An accuracy predictor fitted to the search's measured validation
// accuracies (OFA's "accuracy predictor", here a ridge regression). One
// measurement on 5,000 validation images has a standard error of ~0.4 points,
// about as large as the accuracy differences between neighbouring subnets, so
// a strict frontier over single measurements is a thin envelope of the lucky
// ones. The model pools every measurement: each architecture gets one smooth
// estimate from the choices it shares with all the others, the frontier is
// taken over the estimates, and the final profile still reports each Pareto
// subnet's measured TEST accuracy.
//
// Encoding (thermometer, so a larger choice adds to a smaller one's effect):
// per stage, one feature per extra-depth level reached; per width position,
// one per width-multiplier choice above the smallest reached; per block, one
// per expand-ratio choice above the smallest reached, 0 while the block is
// inactive; then the narrowest width multiplier and the narrowest active
// expand ratio, thermometer-coded the same way (the bottleneck layer limits
// the network beyond the per-layer sum). Torch-free.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/control_tuple.h"
#include "models/ofa_resnet_config.h"

namespace superserve::nas {

class FittedAccuracyModel {
 public:
  // Ridge regression of accuracy on the encoding. Needs at least as many
  // architectures as features. `monotone` constrains every feature's weight
  // to >= 0, so that a larger choice anywhere never predicts a lower
  // accuracy (and the largest architecture is predicted the most accurate);
  // unconstrained, measurement noise can make a few weights negative.
  static absl::StatusOr<FittedAccuracyModel> Fit(const models::OfaResNetConfig& config,
                                                 const std::vector<ControlTuple>& architectures,
                                                 const std::vector<double>& accuracy,
                                                 double ridge = 10.0, bool monotone = false);

  static std::vector<double> Encode(const models::OfaResNetConfig& config,
                                    const ControlTuple& architecture);

  double Predict(const ControlTuple& architecture) const;

  // Root-mean-square residual over the fitted points (percentage points).
  double rmse() const { return rmse_; }
  std::string DebugString() const;

 private:
  models::OfaResNetConfig config_;
  std::vector<double> weights_;
  double rmse_ = 0;
  size_t points_ = 0;
  bool monotone_ = false;
};

}  // namespace superserve::nas

#endif  // SUPERSERVE_NAS_PROFILER_ACCURACY_MODEL_H_
