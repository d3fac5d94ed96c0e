#ifndef SUPERSERVE_NAS_PROFILER_SUPERNET_TRAINER_H_
#define SUPERSERVE_NAS_PROFILER_SUPERNET_TRAINER_H_

// The torch side of the NAS profiler: datasets as tensors, weight-shared
// supernet training (sandwich rule + in-place distillation), per-slot
// SubnetNorm calibration, accuracy evaluation and latency measurement.
// Torch-free header (pimpl) so the CLI, the search and the tests do not pay
// for torch headers; everything torch lives in supernet_trainer.cc.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/control_tuple.h"
#include "common/idx_reader.h"
#include "common/time.h"
#include "models/ofa_resnet.h"

namespace superserve::nas {

// Fashion-MNIST's training-set pixel mean and standard deviation (of x/255):
// the trainer normalises with them, and the profile records them so that the
// worker applies the same normalisation to served inputs.
inline constexpr float kPixelMean = 0.2860f;
inline constexpr float kPixelStd = 0.3530f;

// Images as a normalised float tensor [n, 1, H, W] plus int64 labels, in a
// fixed order. Copies share the tensors (immutable).
class ImageDataset {
 public:
  ImageDataset();
  ~ImageDataset();
  ImageDataset(const ImageDataset&);
  ImageDataset& operator=(const ImageDataset&);

  // The items of `source` at `indices` (all of them, in order, when empty).
  static absl::StatusOr<ImageDataset> FromLabeledImages(const LabeledImages& source,
                                                        const std::vector<int64_t>& indices = {});
  int64_t size() const;
  // The first `n` items (n clamped to size()).
  ImageDataset Prefix(int64_t n) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

// Fashion-MNIST split the way the search needs it: a seeded permutation of
// the 60,000 training images puts `validation_size` aside (validation, used by
// the search), the rest trains; t10k is the test set (reported accuracy only).
struct FashionMnistSplits {
  ImageDataset train;
  ImageDataset validation;
  ImageDataset test;
};
absl::StatusOr<FashionMnistSplits> LoadFashionMnistSplits(const std::string& dir,
                                                          int64_t validation_size, uint64_t seed,
                                                          bool load_test = true);

// Intra-op threads for everything torch does in this process.
void SetTorchThreads(int threads);

struct TrainOptions {
  int epochs = 10;
  int batch_size = 128;
  double learning_rate = 0.1;  // peak; linear warm-up then cosine decay to 0
  double warmup_epochs = 1.0;   // 0 for fine-tuning a trained supernet
  double momentum = 0.9;
  double weight_decay = 5e-5;  // conv/linear weights only
  // Sandwich rule: every step trains the largest, the smallest and this many
  // random subnets, gradients accumulated, one optimiser step.
  int random_subnets = 2;
  // In-place distillation: the smaller subnets learn the largest subnet's
  // (detached) soft predictions instead of the labels.
  bool distill = true;
  bool augment = true;  // random crop (padding 2) + horizontal flip
  uint64_t seed = 1;
  int64_t max_steps = -1;           // stop early (tests); -1 = all epochs
  std::string checkpoint_path;      // saved after every epoch when non-empty
  std::function<void(const std::string&)> log;  // one line per epoch
};

struct TrainReport {
  std::vector<double> largest_losses;  // the largest subnet's loss at each step
  int epochs_done = 0;
  int64_t steps = 0;
  double seconds = 0;
};

// Trains `model` (put into training mode) with SGD + Nesterov momentum.
absl::StatusOr<TrainReport> TrainSupernet(models::OfaResNet& model, const ImageDataset& train,
                                          const TrainOptions& options);

// Calibrates `slot`'s SubnetNorm statistics: forward passes of the slot's
// subnet over `data` in order, batch size `batch_size`. Leaves the model in
// inference mode.
absl::Status CalibrateSlot(models::OfaResNet& model, int slot, const ImageDataset& data,
                           int batch_size = 500);

// Every SubnetNorm layer's mean then var for `slot`, concatenated in layer
// order (layers the slot skips contribute nothing). For tests and checks.
absl::StatusOr<std::vector<float>> SlotStatistics(models::OfaResNet& model, int slot);

struct EvalResult {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy_percent = 0;
};
// Top-1 accuracy of the slot `control.subnet_id` (inference mode, slot
// statistics) over `data` in order with a fixed batch size: deterministic
// for a given thread count.
absl::StatusOr<EvalResult> EvaluateSubnet(models::OfaResNet& model, const ControlTuple& control,
                                          const ImageDataset& data, int batch_size = 500);

// Latency of one forward pass of `control` per batch size: `warmup` untimed
// runs then the median of `repeats` timed runs, on a fixed random input.
absl::StatusOr<std::vector<Nanos>> MeasureLatency(models::OfaResNet& model,
                                                  const ControlTuple& control,
                                                  const std::vector<int32_t>& batch_sizes,
                                                  int warmup, int repeats);

}  // namespace superserve::nas

#endif  // SUPERSERVE_NAS_PROFILER_SUPERNET_TRAINER_H_
