#include "operators/subnet_ops.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace superserve::ops {

at::Tensor WeightSliceConv2dForward(const at::Tensor& x, const at::Tensor& weight,
                                    const c10::optional<at::Tensor>& bias, int64_t out_channels,
                             int64_t stride) {
  TORCH_CHECK(x.dim() == 4, "WeightSlice conv2d: input must be [N, C, H, W], got ", x.sizes());
  TORCH_CHECK(weight.dim() == 4, "WeightSlice conv2d: weight must be 4-d");
  const int64_t in_channels = x.size(1);
  TORCH_CHECK(in_channels >= 1 && in_channels <= weight.size(1), "WeightSlice conv2d: ",
              in_channels, " input channels, weight has at most ", weight.size(1));
  TORCH_CHECK(out_channels >= 1 && out_channels <= weight.size(0), "WeightSlice conv2d: ",
              out_channels, " output channels requested, weight has at most ", weight.size(0));
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
  TORCH_CHECK(in_features >= 1 && in_features <= weight.size(1), "WeightSlice linear: ",
              in_features, " input features, weight has at most ", weight.size(1));
  TORCH_CHECK(out_features >= 1 && out_features <= weight.size(0), "WeightSlice linear: ",
              out_features, " output features requested, weight has at most ", weight.size(0));
  // A [out, in] slice of a row-major [max_out, max_in] matrix has a leading
  // dimension BLAS accepts, so linear (addmm on weight^T) needs no copy.
  at::Tensor w = weight.narrow(0, 0, out_features).narrow(1, 0, in_features);
  c10::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = bias->narrow(0, 0, out_features);
  return at::linear(x, w, b);
}

at::Tensor SubnetNormWithStatistics(const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& bias, const at::Tensor& mean_storage,
                                    const at::Tensor& var_storage, int64_t offset, double eps) {
  TORCH_CHECK(x.dim() >= 2, "SubnetNorm: input must be [N, C, ...]");
  const int64_t c = x.size(1);
  TORCH_CHECK(c <= weight.size(0), "SubnetNorm: ", c, " channels, layer has at most ",
              weight.size(0));
  TORCH_CHECK(offset >= 0 && offset + c <= mean_storage.size(0) &&
                  offset + c <= var_storage.size(0),
              "SubnetNorm: statistics range [", offset, ", ", offset + c,
              ") outside the storage of ", mean_storage.size(0));
  auto prefix = [c](const at::Tensor& t) { return t.size(0) == c ? t : t.narrow(0, 0, c); };
  return at::batch_norm(x, prefix(weight), prefix(bias), mean_storage.narrow(0, offset, c),
                        var_storage.narrow(0, offset, c), /*training=*/false, /*momentum=*/0.0,
                        eps, /*cudnn_enabled=*/false);
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
  TORCH_CHECK(slot >= 0 && slot < slot_offsets.size(0), "SubnetNorm: unknown slot ", slot,
              " (", slot_offsets.size(0), " slots)");
  const int64_t offset = slot_offsets[slot].item<int64_t>();
  const int64_t channels = slot_channels[slot].item<int64_t>();
  TORCH_CHECK(offset >= 0 && channels == x.size(1), "SubnetNorm: slot ", slot, " holds ",
              channels, " channels, input has ", x.size(1));
  return SubnetNormWithStatistics(x, weight, bias, mean_storage, var_storage, offset, eps);
}

}  // namespace

// Registered here, next to the kernels the C++ modules call, so that any
// binary using the operators also links the registration.
TORCH_LIBRARY(superserve, m) {
  m.def("weight_slice_conv2d(Tensor x, Tensor weight, Tensor? bias, int out_channels, int stride) -> Tensor",
        &WeightSliceConv2dForward);
  m.def("weight_slice_linear(Tensor x, Tensor weight, Tensor? bias, int out_features) -> Tensor",
        &WeightSliceLinearForward);
  m.def("subnet_norm(Tensor x, Tensor weight, Tensor bias, Tensor mean_storage, Tensor var_storage, Tensor slot_offsets, Tensor slot_channels, int slot, float eps) -> Tensor",
        &SubnetNormOp);
  m.def("layer_select(int block_index, int active_depth) -> bool", &LayerSelectActive);
}

}  // namespace superserve::ops
