#ifndef SUPERSERVE_NAS_PROFILER_EARLY_EXIT_TRAINER_H_
#define SUPERSERVE_NAS_PROFILER_EARLY_EXIT_TRAINER_H_

// Training, evaluation and execution-time profiling of the early-exit model
// (models/early_exit.h) on Fashion-MNIST: what `superserve-early-exit` runs
// to produce models/fmnist-exit. Torch-free header.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/idx_reader.h"
#include "common/image_applications.h"
#include "common/model_profile.h"
#include "models/early_exit.h"

namespace superserve::nas {

struct EarlyExitTrainOptions {
  int epochs = 3;
  int batch_size = 128;
  double learning_rate = 2e-3;  // Adam, cosine decay to 0
  // Each batch noises this fraction of its images (noise std uniform in
  // [0, max_noise]) so the exits see the noisy application's domain.
  double noisy_fraction = 0.3;
  float max_noise = 0.4f;
  uint64_t seed = 1;
  int64_t max_steps = -1;  // stop early (tests)
  std::function<void(const std::string&)> log;
};

// Joint training: the loss is the sum of every exit's cross-entropy.
// Inputs are pixel/255 normalised with (mean, std).
absl::Status TrainEarlyExit(models::EarlyExitNet& net, const LabeledImages& train, float mean,
                            float std_dev, const EarlyExitTrainOptions& options);

// Accuracy in percent; fractions in [0, 1].
struct EarlyExitEval {
  std::string application;  // "all" for the whole clean test set
  int64_t samples = 0;
  std::vector<double> exit_accuracy;       // every sample forced out at exit i
  std::vector<double> exit_fraction;       // share leaving at exit i (threshold rule)
  std::vector<double> accuracy_of_leavers; // accuracy of those leaving at exit i
  double overall_accuracy = 0;             // threshold rule
  double last_exit_accuracy = 0;           // no early leaving
};
// The clean test set ("all") and then each application's inputs.
absl::StatusOr<std::vector<EarlyExitEval>> EvaluateEarlyExit(
    models::EarlyExitNet& net, const LabeledImages& test, float mean, float std_dev,
    const std::vector<ImageApplication>& apps);

struct DynamicProfileOptions {
  int samples_per_application = 500;  // batch-1 timings per application
  int bins = 30;
  std::vector<int32_t> batch_sizes = {1, 2, 4, 8, 16};
  int batches_per_size = 30;  // timed batches per size for the c0 + c1 k max(l) fit
  double holdout = 0.3;       // share of batches held back to report the fit error
  int warmup = 20;
  uint64_t seed = 1;
  std::function<void(const std::string&)> log;
};

struct DynamicProfileReport {
  // Per application: every batch-1 measurement (us) and its exit.
  std::vector<std::vector<double>> latencies_us;
  std::vector<std::vector<int32_t>> exits;
  DynamicModelProfile profile;  // histograms + the fitted batch model
  int64_t fit_batches = 0;
  int64_t holdout_batches = 0;
  double holdout_mean_abs_error_percent = 0;
  double holdout_max_abs_error_percent = 0;
};
// Measures each application's execution-time distribution at batch 1 and
// fits batch time = c0 + c1 * k * max(l_i) over batches of each size drawn
// from one application (l_i: the members' batch-1 times).
absl::StatusOr<DynamicProfileReport> ProfileEarlyExit(models::EarlyExitNet& net,
                                                      const LabeledImages& test, float mean,
                                                      float std_dev,
                                                      const std::vector<ImageApplication>& apps,
                                                      const DynamicProfileOptions& options);

}  // namespace superserve::nas

#endif  // SUPERSERVE_NAS_PROFILER_EARLY_EXIT_TRAINER_H_
