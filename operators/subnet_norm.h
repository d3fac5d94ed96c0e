#ifndef SUPERSERVE_OPERATORS_SUBNET_NORM_H_
#define SUPERSERVE_OPERATORS_SUBNET_NORM_H_

// SubnetNorm (SuperServe §3): batch normalisation whose mean/var are
// precomputed per subnet slot, with the affine weight/bias shared by all
// subnets (prefix-sliced like WeightSlice).
//
// Compact storage: one flat mean and one flat var tensor per layer. Slot s
// owns the range [slot_offsets[s], slot_offsets[s] + slot_channels[s]) where
// slot_channels[s] is this layer's active width in slot s's architecture, or 0
// (offset -1) when slot s skips the layer. A slot therefore costs exactly the
// statistics of its own subnet, not the supernet's maximum widths.

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <cstdint>
#include <vector>

namespace superserve::ops {

enum class NormMode {
  kSlotStatistics,   // inference: the active slot's precomputed mean/var
  kBatchStatistics,  // training: the batch's own mean/var, nothing stored
  kCalibrate,        // batch mean/var, also averaged into an accumulator
};

class SubnetNormImpl : public torch::nn::Module {
 public:
  // statistics_dtype: kFloat or kHalf (half the per-slot memory; values are
  // checked to be finite and within float16 range when written).
  explicit SubnetNormImpl(int64_t max_channels, double eps = 1e-5,
                          c10::ScalarType statistics_dtype = c10::ScalarType::Float);

  // Output of x ([N, C, H, W] or [N, C]) under the current mode; `slot` is
  // read only in kSlotStatistics mode. Throws c10::Error for an unknown slot or
  // a slot that holds a different channel count.
  torch::Tensor forward(const torch::Tensor& x, int64_t slot);

  void set_mode(NormMode mode) { mode_ = mode; }
  NormMode mode() const { return mode_; }

  // Replaces the slot table: slot s gets channels_per_slot[s] channels (0 =
  // layer unused), mean 0 and var 1. One allocation for all slots.
  void ResetSlots(const std::vector<int64_t>& channels_per_slot);
  // Appends one slot (mean 0, var 1); returns its index. Reallocates storage.
  int64_t AddSlot(int64_t channels);
  int64_t num_slots() const { return static_cast<int64_t>(offsets_.size()); }
  int64_t ChannelsInSlot(int64_t slot) const { return channels_.at(slot); }

  // Views of slot s's statistics (empty when the slot skips the layer).
  torch::Tensor SlotMean(int64_t slot) const;
  torch::Tensor SlotVar(int64_t slot) const;
  void SetSlotStatistics(int64_t slot, const torch::Tensor& mean, const torch::Tensor& var);

  // Calibration (mode kCalibrate): every forward adds the batch's per-channel
  // mean and (biased) variance, weighted by batch size; FinishCalibration
  // writes the averages into `slot` (a no-op when the slot skips the layer;
  // an error when it uses the layer but no batch reached it).
  void BeginCalibration();
  void FinishCalibration(int64_t slot);

  // After loading buffers from an archive, rebuilds the C++ copy of the slot
  // table that forward reads (so forward never reads a tensor element).
  void SyncSlotTableFromBuffers();

  double eps() const { return eps_; }
  int64_t max_channels() const { return weight.size(0); }

  // Inference off the CPU runs batch_norm on each slot's slices (affine
  // prefix, statistics range) made once and kept, rather than four slices and
  // two casts per call: a small network on a GPU is launch- and dispatch-bound
  // (docs/gpu.md). The CPU has its own kernel that reads the slot in place.
  // This switch takes the kept-slices path on the CPU too (for tests).
  void set_keep_slot_slices(bool on) {
    keep_slices_ = on;
    slot_slices_.clear();
  }

  torch::Tensor weight;  // [max_channels], shared affine scale
  torch::Tensor bias;    // [max_channels], shared affine shift
  torch::Tensor mean_storage;
  torch::Tensor var_storage;
  torch::Tensor slot_offsets;   // int64 [num_slots]
  torch::Tensor slot_channels;  // int64 [num_slots]

 private:
  void WriteSlotTable();
  struct SlotSlices {
    torch::Tensor weight, bias, mean, var;  // in the input's dtype
  };
  // Slot `slot`'s slices, rebuilt when a tensor they come from was replaced
  // or written in place (a cast copy does not follow writes).
  const SlotSlices& SlicesFor(int64_t slot, c10::ScalarType dtype);

  double eps_;
  c10::ScalarType statistics_dtype_;
  NormMode mode_ = NormMode::kSlotStatistics;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> channels_;
  torch::Tensor calib_mean_sum_, calib_var_sum_;
  int64_t calib_samples_ = 0;
  bool keep_slices_ = false;
  std::vector<SlotSlices> slot_slices_;  // by slot; undefined until first use
  std::array<const void*, 4> sliced_storage_{};  // weight, bias, mean, var
  std::array<int64_t, 4> sliced_version_{};
};
TORCH_MODULE(SubnetNorm);

}  // namespace superserve::ops

#endif  // SUPERSERVE_OPERATORS_SUBNET_NORM_H_
