#ifndef SUPERSERVE_MODELS_EXTRACTED_SUBNET_H_
#define SUPERSERVE_MODELS_EXTRACTED_SUBNET_H_

// A standalone dense ResNet for one OFA-ResNet subnet: plain Conv2d /
// BatchNorm2d / Linear layers at the subnet's widths with weights copied from
// the supernet and the subnet slot's statistics as BatchNorm running stats.
// It is the baseline SubNetAct is compared against (loading per-subnet models
// from disk, serving several separately), not part of the serving path.
// Torch-light header: include <torch/torch.h> where you call Forward.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/control_tuple.h"
#include "models/ofa_resnet_config.h"

namespace at {
class Tensor;
}

namespace superserve::models {

class ExtractedSubnet {
 public:
  struct Impl;  // defined in extracted_subnet_impl.h (torch)
  explicit ExtractedSubnet(std::unique_ptr<Impl> impl);
  ~ExtractedSubnet();
  ExtractedSubnet(const ExtractedSubnet&) = delete;
  ExtractedSubnet& operator=(const ExtractedSubnet&) = delete;

  // Inference forward (eval mode, no grad) of x [N, C, H, W] -> logits [N, classes].
  at::Tensor Forward(const at::Tensor& x);

  // Moves the weights to `device` ("cpu", "cuda", "cuda:N"; models/device.h);
  // Forward then expects its input there.
  absl::Status MoveTo(const std::string& device);

  // Weights, statistics and the architecture needed to rebuild the module.
  absl::Status Save(const std::string& path) const;
  static absl::StatusOr<std::unique_ptr<ExtractedSubnet>> Load(const std::string& path);

  // Bytes of all parameters and buffers.
  int64_t ResidentBytes() const;
  const OfaResNetConfig& config() const;
  const ControlTuple& architecture() const;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace superserve::models

#endif  // SUPERSERVE_MODELS_EXTRACTED_SUBNET_H_
