#include "operators/subnet_norm.h"

#include <torch/torch.h>

#include "operators/subnet_ops.h"

namespace superserve::ops {

SubnetNormImpl::SubnetNormImpl(int64_t max_channels, double eps, c10::ScalarType statistics_dtype)
    : eps_(eps), statistics_dtype_(statistics_dtype) {
  TORCH_CHECK(max_channels > 0, "SubnetNorm: max_channels must be > 0");
  TORCH_CHECK(statistics_dtype == torch::kFloat || statistics_dtype == torch::kHalf,
              "SubnetNorm: statistics dtype must be float32 or float16");
  weight = register_parameter("weight", torch::ones({max_channels}));
  bias = register_parameter("bias", torch::zeros({max_channels}));
  mean_storage = register_buffer("mean_storage", torch::zeros({0}, statistics_dtype));
  var_storage = register_buffer("var_storage", torch::ones({0}, statistics_dtype));
  slot_offsets = register_buffer("slot_offsets", torch::zeros({0}, torch::kInt64));
  slot_channels = register_buffer("slot_channels", torch::zeros({0}, torch::kInt64));
}

torch::Tensor SubnetNormImpl::forward(const torch::Tensor& x, int64_t slot) {
  switch (mode_) {
    case NormMode::kSlotStatistics: {
      TORCH_CHECK(slot >= 0 && slot < num_slots(), "SubnetNorm: unknown slot ", slot, " (",
                  num_slots(), " slots)");
      TORCH_CHECK(channels_[slot] == x.size(1), "SubnetNorm: slot ", slot, " holds ",
                  channels_[slot], " channels for this layer, input has ", x.size(1));
      if ((keep_slices_ || !x.device().is_cpu()) && !at::GradMode::is_enabled() &&
          channels_[slot] > 0 && x.dim() >= 2) {
        const SlotSlices& s = SlicesFor(slot, x.scalar_type());
        return at::batch_norm(x, s.weight, s.bias, s.mean, s.var, /*training=*/false,
                              /*momentum=*/0.0, eps_, at::globalContext().userEnabledCuDNN());
      }
      return SubnetNormWithStatistics(x, weight, bias, mean_storage, var_storage, offsets_[slot],
                                      eps_);
    }
    case NormMode::kBatchStatistics:
      return SubnetNormWithBatchStatistics(x, weight, bias, eps_);
    case NormMode::kCalibrate: {
      torch::NoGradGuard no_grad;
      std::vector<int64_t> dims = {0};
      for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
      torch::Tensor mean = x.mean(dims);
      torch::Tensor var = x.var(dims, /*unbiased=*/false);
      const int64_t n = x.size(0);
      if (calib_samples_ == 0) {
        calib_mean_sum_ = mean * n;
        calib_var_sum_ = var * n;
      } else {
        TORCH_CHECK(calib_mean_sum_.size(0) == mean.size(0),
                    "SubnetNorm: channel count changed during calibration");
        calib_mean_sum_ += mean * n;
        calib_var_sum_ += var * n;
      }
      calib_samples_ += n;
      return SubnetNormWithBatchStatistics(x, weight, bias, eps_);
    }
  }
  TORCH_CHECK(false, "SubnetNorm: bad mode");
}

const SubnetNormImpl::SlotSlices& SubnetNormImpl::SlicesFor(int64_t slot,
                                                            c10::ScalarType dtype) {
  const std::array<const torch::Tensor*, 4> from = {&weight, &bias, &mean_storage, &var_storage};
  bool stale = false;
  for (size_t i = 0; i < from.size(); ++i) {
    const void* storage = from[i]->storage().data();
    const int64_t version = from[i]->_version();
    stale = stale || storage != sliced_storage_[i] || version != sliced_version_[i];
    sliced_storage_[i] = storage;
    sliced_version_[i] = version;
  }
  if (stale) slot_slices_.clear();
  if (slot_slices_.size() < static_cast<size_t>(num_slots())) slot_slices_.resize(num_slots());
  SlotSlices& s = slot_slices_[slot];
  if (!s.mean.defined() || s.mean.scalar_type() != dtype) {
    const int64_t c = channels_[slot];
    s.weight = weight.narrow(0, 0, c).to(dtype);
    s.bias = bias.narrow(0, 0, c).to(dtype);
    s.mean = mean_storage.narrow(0, offsets_[slot], c).to(dtype);
    s.var = var_storage.narrow(0, offsets_[slot], c).to(dtype);
  }
  return s;
}

void SubnetNormImpl::ResetSlots(const std::vector<int64_t>& channels_per_slot) {
  offsets_.clear();
  channels_.clear();
  int64_t total = 0;
  for (int64_t c : channels_per_slot) {
    TORCH_CHECK(c >= 0 && c <= max_channels(), "SubnetNorm: slot with ", c,
                " channels, layer has at most ", max_channels());
    offsets_.push_back(c > 0 ? total : -1);
    channels_.push_back(c);
    total += c;
  }
  torch::NoGradGuard no_grad;
  // On the storage's device: slots may be set after the model moved.
  const auto options = mean_storage.options().dtype(statistics_dtype_);
  mean_storage.set_(torch::zeros({total}, options));
  var_storage.set_(torch::ones({total}, options));
  WriteSlotTable();
}

int64_t SubnetNormImpl::AddSlot(int64_t channels) {
  TORCH_CHECK(channels >= 0 && channels <= max_channels(), "SubnetNorm: slot with ", channels,
              " channels, layer has at most ", max_channels());
  torch::NoGradGuard no_grad;
  offsets_.push_back(channels > 0 ? mean_storage.size(0) : -1);
  channels_.push_back(channels);
  const auto options = mean_storage.options().dtype(statistics_dtype_);
  mean_storage.set_(torch::cat({mean_storage, torch::zeros({channels}, options)}));
  var_storage.set_(torch::cat({var_storage, torch::ones({channels}, options)}));
  WriteSlotTable();
  return num_slots() - 1;
}

void SubnetNormImpl::WriteSlotTable() {
  torch::NoGradGuard no_grad;
  slot_offsets.set_(torch::tensor(offsets_, torch::kInt64).to(slot_offsets.device()));
  slot_channels.set_(torch::tensor(channels_, torch::kInt64).to(slot_channels.device()));
}

void SubnetNormImpl::SyncSlotTableFromBuffers() {
  TORCH_CHECK(slot_offsets.numel() == slot_channels.numel(), "SubnetNorm: slot table mismatch");
  auto off = slot_offsets.to(torch::kCPU).contiguous();
  auto ch = slot_channels.to(torch::kCPU).contiguous();
  offsets_.assign(off.data_ptr<int64_t>(), off.data_ptr<int64_t>() + off.numel());
  channels_.assign(ch.data_ptr<int64_t>(), ch.data_ptr<int64_t>() + ch.numel());
  // Written without offset + channels, which a checkpoint's values (2^62 +
  // 2^62) overflowed past the check; a negative width passed it too.
  for (size_t s = 0; s < offsets_.size(); ++s) {
    TORCH_CHECK(channels_[s] == 0 ||
                    (channels_[s] > 0 && offsets_[s] >= 0 &&
                     offsets_[s] <= mean_storage.size(0) &&
                     channels_[s] <= mean_storage.size(0) - offsets_[s] &&
                     mean_storage.size(0) == var_storage.size(0)),
                "SubnetNorm: slot ", s, " statistics outside the storage (offset ", offsets_[s],
                ", ", channels_[s], " channels, storage ", mean_storage.size(0), ")");
  }
}

torch::Tensor SubnetNormImpl::SlotMean(int64_t slot) const {
  TORCH_CHECK(slot >= 0 && slot < num_slots(), "SubnetNorm: unknown slot ", slot);
  if (channels_[slot] == 0) return torch::empty({0}, statistics_dtype_);
  return mean_storage.narrow(0, offsets_[slot], channels_[slot]);
}

torch::Tensor SubnetNormImpl::SlotVar(int64_t slot) const {
  TORCH_CHECK(slot >= 0 && slot < num_slots(), "SubnetNorm: unknown slot ", slot);
  if (channels_[slot] == 0) return torch::empty({0}, statistics_dtype_);
  return var_storage.narrow(0, offsets_[slot], channels_[slot]);
}

void SubnetNormImpl::SetSlotStatistics(int64_t slot, const torch::Tensor& mean,
                                       const torch::Tensor& var) {
  TORCH_CHECK(slot >= 0 && slot < num_slots(), "SubnetNorm: unknown slot ", slot);
  TORCH_CHECK(mean.numel() == channels_[slot] && var.numel() == channels_[slot],
              "SubnetNorm: slot ", slot, " holds ", channels_[slot], " channels, got ",
              mean.numel(), "/", var.numel());
  if (channels_[slot] == 0) return;
  torch::NoGradGuard no_grad;
  const double limit = statistics_dtype_ == torch::kHalf ? 65504.0 : 3.4e38;
  TORCH_CHECK(mean.isfinite().all().item<bool>() && var.isfinite().all().item<bool>() &&
                  mean.abs().max().item<double>() <= limit && var.min().item<double>() >= 0 &&
                  var.max().item<double>() <= limit,
              "SubnetNorm: slot ", slot, " statistics are not finite, negative (var) or exceed ",
              limit,
              statistics_dtype_ == torch::kHalf
                  ? " (float16 storage; build the model with float32 statistics)"
                  : "");
  SlotMean(slot).copy_(mean.reshape({-1}));
  SlotVar(slot).copy_(var.reshape({-1}));
}

void SubnetNormImpl::BeginCalibration() {
  calib_samples_ = 0;
  calib_mean_sum_ = torch::Tensor();
  calib_var_sum_ = torch::Tensor();
}

void SubnetNormImpl::FinishCalibration(int64_t slot) {
  TORCH_CHECK(slot >= 0 && slot < num_slots(), "SubnetNorm: unknown slot ", slot);
  if (channels_[slot] == 0) return;
  TORCH_CHECK(calib_samples_ > 0, "SubnetNorm: slot ", slot,
              " uses this layer but no calibration batch reached it");
  TORCH_CHECK(calib_mean_sum_.size(0) == channels_[slot], "SubnetNorm: calibrated ",
              calib_mean_sum_.size(0), " channels, slot ", slot, " holds ", channels_[slot]);
  SetSlotStatistics(slot, calib_mean_sum_ / static_cast<double>(calib_samples_),
                    calib_var_sum_ / static_cast<double>(calib_samples_));
  BeginCalibration();
}

}  // namespace superserve::ops
