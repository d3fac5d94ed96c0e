#ifndef SUPERSERVE_MODELS_OFA_RESNET_H_
#define SUPERSERVE_MODELS_OFA_RESNET_H_

// OfaResNet: the OFA-ResNet supernet family built from SubNetAct's operators
// (operators/: LayerSelect, WeightSlice, SubnetNorm). One instance holds the
// maximum-width weights once plus per-slot normalisation statistics, and
// Actuate() switches the active subnet in place (integers only, no tensor
// work), so a worker calls Actuate(control) then Forward(batch) per batch.
//
// ControlTuple layout and channel rules: see ofa_resnet_config.h.
//
// Slots. A slot is one subnet architecture with its own SubnetNorm
// statistics; ControlTuple::subnet_id names it (0 <= id < NumSlots()). Slot
// ids are dense, assigned in order by SetSlots/AddSlot, and saved with the
// checkpoint. A control tuple for slot s must describe s's architecture (up
// to the expand ratios of skipped blocks). kNoSlot (-1) is allowed only in
// training mode, where normalisation uses batch statistics.
//
// Modes:
//   inference (default, Eval()): slot statistics, Forward runs without grad.
//   training (Train()): batch statistics, autograd on, any valid architecture
//     (sandwich rule / in-place distillation: Actuate then Forward per subnet).
//   calibration: BeginCalibration(slot); Forward over training batches (no
//     grad, batch statistics, averaged per layer); FinishCalibration() stores
//     the averages as the slot's statistics and returns to inference mode.
//
// Not thread-safe: one caller at a time (actuation state is per instance).
// Header is torch-light (pimpl); include <torch/torch.h> to build tensors.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/control_tuple.h"
#include "models/extracted_subnet.h"
#include "models/ofa_resnet_config.h"

namespace at {
class Tensor;
}
namespace torch::nn {
class Module;
}

namespace superserve::models {

class OfaResNet {
 public:
  // Random initialisation (OFA's: Kaiming conv, unit norm scale), seeded via
  // torch::manual_seed(seed). No slots; the largest architecture is active
  // in training mode.
  static absl::StatusOr<std::unique_ptr<OfaResNet>> Create(const OfaResNetConfig& config,
                                                           uint64_t seed = 0);
  ~OfaResNet();
  OfaResNet(const OfaResNet&) = delete;
  OfaResNet& operator=(const OfaResNet&) = delete;

  const OfaResNetConfig& config() const;

  // Adopts `choices`' depth/expand/width choice lists (e.g. to fine-tune a
  // trained supernet over a wider elastic range). Everything that shapes the
  // weights must match: the fixed fields and the largest architecture's
  // shape. Existing slots must stay valid. On error nothing changes.
  absl::Status SetElasticChoices(const OfaResNetConfig& choices);

  // --- Slots -----------------------------------------------------------
  int NumSlots() const;
  // Replaces all slots: slot i gets architectures[i] (its subnet_id must be i
  // or kNoSlot), statistics mean 0 / var 1 until calibrated.
  absl::Status SetSlots(const std::vector<ControlTuple>& architectures);
  // Appends one slot; returns its id.
  absl::StatusOr<int> AddSlot(const ControlTuple& architecture);
  // The canonical architecture of `slot`, subnet_id = slot.
  absl::StatusOr<ControlTuple> SlotArchitecture(int slot) const;

  // --- Actuation -------------------------------------------------------
  // Switches the active subnet. On error (the message names the field and
  // value) nothing changes.
  absl::Status Actuate(const ControlTuple& control);
  // The active control tuple (canonical form).
  const ControlTuple& active() const;

  // --- Running ---------------------------------------------------------
  // Logits [N, classes] of x [N, input_channels, H, W] through the active
  // subnet. Throws c10::Error on misuse (wrong input shape, no slot active in
  // inference mode); Infer() is the status-returning form for serving.
  at::Tensor Forward(const at::Tensor& x);
  absl::StatusOr<at::Tensor> Infer(const at::Tensor& x);

  // Moves every weight and statistic to `device` ("cpu", "cuda", "cuda:N";
  // models/device.h checks the name). Forward then takes inputs on any
  // device, copies them there and returns logits on `device`.
  absl::Status MoveTo(const std::string& device);
  const std::string& device() const;

  void Train();  // batch statistics, grad enabled
  void Eval();   // slot statistics, no grad
  bool is_training() const;

  absl::Status BeginCalibration(int slot);
  absl::Status FinishCalibration();

  // --- Extraction, persistence, accounting ------------------------------
  // A dense standalone copy of `control`'s subnet (slot statistics as
  // BatchNorm running stats). control.subnet_id must be a slot.
  absl::StatusOr<std::unique_ptr<ExtractedSubnet>> Extract(const ControlTuple& control) const;

  // Weights, all slots' statistics, the slot table and the config.
  absl::Status Save(const std::string& path) const;
  // Returns the model in inference mode with no slot active: Actuate first.
  static absl::StatusOr<std::unique_ptr<OfaResNet>> Load(const std::string& path);

  // Bytes of all parameters and buffers (weights, affine, every slot's stats).
  int64_t ResidentBytes() const;
  int64_t StatisticsBytes() const;  // the per-slot mean/var part of it

  // For training: the underlying module and its trainable parameters.
  torch::nn::Module& module();
  std::vector<at::Tensor> Parameters();

  struct Impl;

 private:
  explicit OfaResNet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace superserve::models

#endif  // SUPERSERVE_MODELS_OFA_RESNET_H_
