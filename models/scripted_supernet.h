#ifndef SUPERSERVE_MODELS_SCRIPTED_SUPERNET_H_
#define SUPERSERVE_MODELS_SCRIPTED_SUPERNET_H_

// A supernet an ML team wrote in PyTorch and saved with torch.jit.save
// (family "torchscript"; docs/export.md). The worker serves it like an
// OfaResNet: Actuate(control) per batch, then Infer(batch). The module's
// layers call the `superserve` custom ops (operators/subnet_ops.h), which
// every binary linking superserve_operators registers, so the scripted module
// and the C++ supernets share one implementation of WeightSlice and
// SubnetNorm.
//
// The contract a scripted module must meet (checked at Load, errors name the
// argument):
//   def forward(self, x: Tensor, subnet_id: int, depths: List[int],
//               expand_ratios: List[float], width_multipliers: List[float])
//       -> Tensor   # logits [N, classes]
// The four control arguments are the profile's ControlTuple of the subnet the
// router chose (subnet_id indexes SubnetNorm's statistics slots). Actuation
// is therefore only argument passing: no weights move.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/control_tuple.h"

namespace at {
class Tensor;
}

namespace superserve::models {

class ScriptedSupernet {
 public:
  // Loads a TorchScript archive (torch.jit.save) in eval mode on the CPU and
  // checks forward's signature against the contract above.
  static absl::StatusOr<std::unique_ptr<ScriptedSupernet>> Load(const std::string& path);
  ~ScriptedSupernet();
  ScriptedSupernet(const ScriptedSupernet&) = delete;
  ScriptedSupernet& operator=(const ScriptedSupernet&) = delete;

  // Remembers the control tuple for the next Infer. The module itself checks
  // it (a subnet it cannot run fails Infer with the module's message).
  absl::Status Actuate(const ControlTuple& control);
  // Logits of x through the actuated subnet; a TorchScript error (wrong
  // shape, unknown slot, a `raise` in forward, ...) becomes INTERNAL naming
  // the module's file, with its message: the worker checked the batch against
  // the profile before, so the failure is the module's, not the client's.
  absl::StatusOr<at::Tensor> Infer(const at::Tensor& x);

  // Moves the module's parameters and buffers to `device` ("cpu", "cuda",
  // "cuda:N"; models/device.h checks the name); Infer then copies its input
  // there.
  absl::Status MoveTo(const std::string& device);
  // Bytes of the module's parameters and buffers (its submodules' included).
  int64_t ResidentBytes() const;

 private:
  struct Impl;
  explicit ScriptedSupernet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace superserve::models

#endif  // SUPERSERVE_MODELS_SCRIPTED_SUPERNET_H_
