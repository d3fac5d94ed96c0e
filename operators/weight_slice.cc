#include "operators/weight_slice.h"

#include <cmath>

#include <torch/nn/init.h>

#include "operators/subnet_ops.h"

namespace superserve::ops {

WeightSliceConv2dImpl::WeightSliceConv2dImpl(int64_t max_in, int64_t max_out, int64_t kernel,
                                             int64_t stride, bool with_bias)
    : stride_(stride) {
  TORCH_CHECK(max_in > 0 && max_out > 0 && kernel > 0 && kernel % 2 == 1 && stride > 0,
              "WeightSliceConv2d: bad shape");
  weight = register_parameter("weight", torch::empty({max_out, max_in, kernel, kernel}));
  torch::nn::init::kaiming_normal_(weight, 0, torch::kFanOut, torch::kReLU);
  if (with_bias) bias = register_parameter("bias", torch::zeros({max_out}));
}

torch::Tensor WeightSliceConv2dImpl::forward(const torch::Tensor& x, int64_t out_channels) {
  return WeightSliceConv2dForward(x, weight, bias.defined() ? c10::optional<at::Tensor>(bias)
                                                     : c10::nullopt,
                           out_channels, stride_);
}

WeightSliceLinearImpl::WeightSliceLinearImpl(int64_t max_in, int64_t max_out) {
  TORCH_CHECK(max_in > 0 && max_out > 0, "WeightSliceLinear: bad shape");
  weight = register_parameter("weight", torch::empty({max_out, max_in}));
  bias = register_parameter("bias", torch::empty({max_out}));
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(static_cast<double>(max_in));
  torch::nn::init::uniform_(bias, -bound, bound);
}

torch::Tensor WeightSliceLinearImpl::forward(const torch::Tensor& x, int64_t out_features) {
  return WeightSliceLinearForward(x, weight, bias, out_features);
}

}  // namespace superserve::ops
