#ifndef SUPERSERVE_MODELS_EARLY_EXIT_H_
#define SUPERSERVE_MODELS_EARLY_EXIT_H_

// EarlyExitNet: a dynamic DNN (Orloj's kind of model). A small CNN in
// stages, each followed by an exit classifier; at serving time a sample
// leaves at the first exit whose softmax confidence reaches the threshold
// (the last exit takes whoever is left), so its execution time depends on
// the input. A batch keeps running stage after stage until its slowest
// member has exited (Orloj's padding semantics): samples that left early
// ride along and keep the logits of their exit.
//
// Not thread-safe: one caller at a time. Torch-light header (pimpl); include
// <torch/torch.h> to build tensors for the training entry points.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace at {
class Tensor;
}

namespace superserve::models {

struct EarlyExitConfig {
  int64_t in_channels = 1;
  int64_t image_size = 28;  // square inputs; each stage but the last halves it
  int64_t num_classes = 10;
  // Output channels of each stage (two 3x3 conv + norm + ReLU each); one exit
  // after every stage.
  std::vector<int64_t> stage_channels = {8, 16, 32};
  // Softmax confidence a sample needs to leave at an exit before the last.
  float exit_threshold = 0.9f;

  absl::Status Validate() const;
};

// What Run returns for a batch of n samples.
struct ExitOutputs {
  std::vector<float> logits;         // n x num_classes, each at its exit
  std::vector<int32_t> exit_taken;   // per sample, 0-based exit index
  int32_t stages_run = 0;            // stages the batch executed (= max exit + 1)
  // Per executed stage, ns from the start of Run until that stage's exit had
  // been decided (the time a sample leaving there was done).
  std::vector<int64_t> exit_reached_ns;
};

class EarlyExitNet {
 public:
  // Random initialisation seeded with `seed`; inference mode.
  static absl::StatusOr<std::unique_ptr<EarlyExitNet>> Create(const EarlyExitConfig& config,
                                                              uint64_t seed = 0);
  // A checkpoint written by Save (configuration included).
  static absl::StatusOr<std::unique_ptr<EarlyExitNet>> Load(const std::string& path);
  absl::Status Save(const std::string& path) const;
  ~EarlyExitNet();
  EarlyExitNet(const EarlyExitNet&) = delete;
  EarlyExitNet& operator=(const EarlyExitNet&) = delete;

  const EarlyExitConfig& config() const;
  int num_exits() const;
  void set_exit_threshold(float threshold);

  // Moves the weights to `device` ("cpu", "cuda", "cuda:N"; models/device.h
  // checks the name). Run copies its input there and each exit's logits back.
  absl::Status MoveTo(const std::string& device);

  // Serving. `input` is n samples of [in_channels, image_size, image_size],
  // already normalised. `max_exit` < 0: all exits; otherwise samples are
  // forced out at that exit at the latest (for per-exit evaluation).
  absl::StatusOr<ExitOutputs> Run(const float* input, int64_t n, int max_exit = -1);

  // Training: train/eval mode and the logits of every exit for the whole
  // batch (no early leaving), for a joint loss. `x` may be on any device: it
  // is copied to the weights'; the logits are on the weights' device.
  void SetTraining(bool training);
  std::vector<at::Tensor> ForwardAllExits(const at::Tensor& x);
  std::vector<at::Tensor> Parameters();
  // Bytes of all parameters and buffers (a worker's footprint of the model).
  int64_t ResidentBytes() const;

 private:
  EarlyExitNet();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace superserve::models

#endif  // SUPERSERVE_MODELS_EARLY_EXIT_H_
