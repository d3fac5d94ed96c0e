#include "operators/subnet_ops.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace superserve::ops {

at::Tensor WeightSliceConv2dForward(const at::Tensor& x, const at::Tensor& weight,
                                    const c10::optional<at::Tensor>& bias, int64_t out_channels,
                                    int64_t stride) {
  TORCH_CHECK(x.dim() == 4, "WeightSlice conv2d: input must be [N, C, H, W], got ", x.sizes());
  TORCH_CHECK(weight.dim() == 4, "WeightSlice conv2d: weight must be 4-d");
  const int64_t in_channels = x.size(1);
  TORCH_CHECK(in_channels >= 1 && in_channels <= weight.size(1),
              "WeightSlice conv2d: ", in_channels, " input channels, weight has at most ",
              weight.size(1));
  TORCH_CHECK(out_channels >= 1 && out_channels <= weight.size(0),
              "WeightSlice conv2d: ", out_channels,
              " output channels requested, weight has at most ", weight.size(0));
  const int64_t k = weight.size(2);
  // Leading slice along dim 0 is contiguous; along dim 1 it is a strided view.
  at::Tensor w = weight.size(0) == out_channels ? weight : weight.narrow(0, 0, out_channels);
  if (weight.size(1) != in_channels) w = w.narrow(1, 0, in_channels);
  c10::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) {
    b = bias->size(0) == out_channels ? *bias : bias->narrow(0, 0, out_channels);
  }
  return at::conv2d(x, w, b, {stride, stride}, {k / 2, k / 2});
}

at::Tensor WeightSliceLinearForward(const at::Tensor& x, const at::Tensor& weight,
                                    const c10::optional<at::Tensor>& bias, int64_t out_features) {
  TORCH_CHECK(weight.dim() == 2, "WeightSlice linear: weight must be 2-d");
  const int64_t in_features = x.size(-1);
  TORCH_CHECK(in_features >= 1 && in_features <= weight.size(1),
              "WeightSlice linear: ", in_features, " input features, weight has at most ",
              weight.size(1));
  TORCH_CHECK(out_features >= 1 && out_features <= weight.size(0),
              "WeightSlice linear: ", out_features,
              " output features requested, weight has at most ", weight.size(0));
  // A [out, in] slice of a row-major [max_out, max_in] matrix has a leading
  // dimension BLAS accepts, so linear (addmm on weight^T) needs no copy.
  at::Tensor w = weight.narrow(0, 0, out_features).narrow(1, 0, in_features);
  c10::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = bias->narrow(0, 0, out_features);
  return at::linear(x, w, b);
}

namespace {

void ScaleShift(const float* in, float* out, int64_t n, float s, float t) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * s + t;
}

__attribute__((target("avx2,fma"))) void ScaleShiftFma(const float* in, float* out, int64_t n,
                                                       float s, float t) {
  for (int64_t i = 0; i < n; ++i) out[i] = __builtin_fmaf(in[i], s, t);
}

template <typename StatT>
void NormalizeChannels(const float* x, float* out, int64_t n, int64_t c, int64_t inner,
                       const float* weight, const float* bias, const StatT* mean, const StatT* var,
                       double eps) {
  // Per channel y = x * scale + shift, folded in float exactly as ATen's CPU
  // inference batch_norm does, so a dense BatchNorm2d with the same
  // statistics gives bit-identical results.
  thread_local std::vector<float> scale, shift;
  scale.resize(c);
  shift.resize(c);
  const float eps_f = static_cast<float>(eps);
  for (int64_t j = 0; j < c; ++j) {
    const float invstd = 1 / std::sqrt(static_cast<float>(var[j]) + eps_f);
    scale[j] = invstd * weight[j];
    shift[j] = bias[j] - static_cast<float>(mean[j]) * scale[j];
  }
  // ATen's AVX2 kernel evaluates x * alpha + beta as one fused multiply-add;
  // do the same where the CPU has FMA so the results are bit-identical.
  static const bool has_fma = __builtin_cpu_supports("fma");
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t j = 0; j < c; ++j) {
      const float* in = x + (b * c + j) * inner;
      float* o = out + (b * c + j) * inner;
      if (has_fma) {
        ScaleShiftFma(in, o, inner, scale[j], shift[j]);
      } else {
        ScaleShift(in, o, inner, scale[j], shift[j]);
      }
    }
  }
}

}  // namespace

at::Tensor SubnetNormWithStatistics(const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& bias, const at::Tensor& mean_storage,
                                    const at::Tensor& var_storage, int64_t offset, double eps) {
  // A scripted module (a package's module.pt) calls this op with tensors of
  // its choosing, and the fast path below reads raw pointers: every shape and
  // device it relies on is checked. Weights or storages of shape [C, 0]
  // passed the size(0) checks and were read past their (empty) data
  // (SIGSEGV), and an offset near INT64_MAX overflowed offset + c past the
  // range check.
  TORCH_CHECK(x.dim() >= 2, "SubnetNorm: input must be [N, C, ...]");
  TORCH_CHECK(weight.dim() == 1 && bias.dim() == 1 && mean_storage.dim() == 1 &&
                  var_storage.dim() == 1,
              "SubnetNorm: weight, bias and statistics storages must be 1-d, got ", weight.sizes(),
              ", ", bias.sizes(), ", ", mean_storage.sizes(), ", ", var_storage.sizes());
  const int64_t c = x.size(1);
  TORCH_CHECK(c <= weight.size(0) && c <= bias.size(0), "SubnetNorm: ", c,
              " channels, layer has at most ", weight.size(0));
  const int64_t storage = std::min(mean_storage.size(0), var_storage.size(0));
  TORCH_CHECK(offset >= 0 && offset <= storage && c <= storage - offset,
              "SubnetNorm: statistics range [", offset, ", +", c, ") outside the storage of ",
              mean_storage.size(0));
  TORCH_CHECK(mean_storage.scalar_type() == var_storage.scalar_type(),
              "SubnetNorm: mean and var storage dtypes differ");
  const bool differentiable =
      at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
  const bool fast =
      !differentiable && x.device().is_cpu() && weight.device().is_cpu() &&
      bias.device().is_cpu() && mean_storage.device().is_cpu() && var_storage.device().is_cpu() &&
      x.scalar_type() == at::kFloat &&
      x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous() &&
      weight.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat &&
      mean_storage.is_contiguous() && var_storage.is_contiguous() &&
      (mean_storage.scalar_type() == at::kFloat || mean_storage.scalar_type() == at::kHalf);
  if (!fast) {  // general path: autograd, other devices/dtypes/layouts
    auto prefix = [c](const at::Tensor& t) { return t.size(0) == c ? t : t.narrow(0, 0, c); };
    return at::batch_norm(x, prefix(weight), prefix(bias),
                          mean_storage.narrow(0, offset, c).to(x.scalar_type()),
                          var_storage.narrow(0, offset, c).to(x.scalar_type()),
                          /*training=*/false, /*momentum=*/0.0, eps, /*cudnn_enabled=*/false);
  }
  // Inference kernel on raw pointers: the slot's statistics are read in place
  // (no per-layer view tensors, no dtype conversion of half storage).
  at::Tensor out = at::empty_like(x);
  const int64_t n = x.size(0);
  const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  if (mean_storage.scalar_type() == at::kHalf) {
    NormalizeChannels(x.data_ptr<float>(), out.data_ptr<float>(), n, c, inner,
                      weight.data_ptr<float>(), bias.data_ptr<float>(),
                      mean_storage.data_ptr<at::Half>() + offset,
                      var_storage.data_ptr<at::Half>() + offset, eps);
  } else {
    NormalizeChannels(x.data_ptr<float>(), out.data_ptr<float>(), n, c, inner,
                      weight.data_ptr<float>(), bias.data_ptr<float>(),
                      mean_storage.data_ptr<float>() + offset,
                      var_storage.data_ptr<float>() + offset, eps);
  }
  return out;
}

at::Tensor SubnetNormWithBatchStatistics(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias, double eps) {
  const int64_t c = x.size(1);
  TORCH_CHECK(c <= weight.size(0), "SubnetNorm: ", c, " channels, layer has at most ",
              weight.size(0));
  return at::batch_norm(x, weight.narrow(0, 0, c), bias.narrow(0, 0, c), {}, {},
                        /*training=*/true, /*momentum=*/0.0, eps, /*cudnn_enabled=*/false);
}

bool LayerSelectActive(int64_t block_index, int64_t active_depth) {
  TORCH_CHECK(block_index >= 0 && active_depth >= 0, "LayerSelect: negative index or depth");
  return block_index < active_depth;
}

namespace {

at::Tensor SubnetNormOp(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& mean_storage, const at::Tensor& var_storage,
                        const at::Tensor& slot_offsets, const at::Tensor& slot_channels,
                        int64_t slot, double eps) {
  TORCH_CHECK(slot >= 0 && slot < slot_offsets.size(0), "SubnetNorm: unknown slot ", slot, " (",
              slot_offsets.size(0), " slots)");
  const int64_t offset = slot_offsets[slot].item<int64_t>();
  const int64_t channels = slot_channels[slot].item<int64_t>();
  TORCH_CHECK(offset >= 0 && channels == x.size(1), "SubnetNorm: slot ", slot, " holds ", channels,
              " channels, input has ", x.size(1));
  return SubnetNormWithStatistics(x, weight, bias, mean_storage, var_storage, offset, eps);
}

}  // namespace

// Registered here, next to the kernels the C++ modules call, so that any
// binary using the operators also links the registration.
TORCH_LIBRARY(superserve, m) {
  m.def(
      "weight_slice_conv2d(Tensor x, Tensor weight, Tensor? bias, int out_channels, int stride) -> "
      "Tensor",
      &WeightSliceConv2dForward);
  m.def("weight_slice_linear(Tensor x, Tensor weight, Tensor? bias, int out_features) -> Tensor",
        &WeightSliceLinearForward);
  m.def(
      "subnet_norm(Tensor x, Tensor weight, Tensor bias, Tensor mean_storage, Tensor var_storage, "
      "Tensor slot_offsets, Tensor slot_channels, int slot, float eps) -> Tensor",
      &SubnetNormOp);
  m.def("layer_select(int block_index, int active_depth) -> bool", &LayerSelectActive);
}

}  // namespace superserve::ops
