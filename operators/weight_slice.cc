#include "operators/weight_slice.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <cmath>

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

const SliceViewCache::Entry& SliceViewCache::Get(const torch::Tensor& weight,
                                                 const torch::Tensor& bias, int64_t in,
                                                 int64_t out) {
  const bool copies = copy_strided_ || !weight.device().is_cpu();
  const void* storage = weight.storage().data();
  // Views alias the storage and follow in-place writes; copies do not.
  const int64_t version = copies ? weight._version() : -1;
  if (storage != storage_ || version != version_) {
    entries_.clear();
    storage_ = storage;
    version_ = version;
  }
  for (const Entry& e : entries_) {
    if (e.in == in && e.out == out) return e;
  }
  Entry e;
  e.in = in;
  e.out = out;
  e.weight = weight.narrow(0, 0, out).narrow(1, 0, in);
  if (copies && !e.weight.is_contiguous()) e.weight = e.weight.contiguous();
  if (bias.defined()) e.bias = bias.narrow(0, 0, out);
  entries_.push_back(std::move(e));
  return entries_.back();
}

torch::Tensor WeightSliceConv2dImpl::forward(const torch::Tensor& x, int64_t out_channels) {
  if (!at::GradMode::is_enabled() && x.dim() == 4) {
    const int64_t in = x.size(1);
    TORCH_CHECK(in >= 1 && in <= max_in() && out_channels >= 1 && out_channels <= max_out(),
                "WeightSlice conv2d: ", in, " -> ", out_channels, " channels, weight has ",
                max_in(), " -> ", max_out());
    const SliceViewCache::Entry& v = views_.Get(weight, bias, in, out_channels);
    const int64_t pad = kernel() / 2;
    return at::conv2d(x, v.weight, v.bias, {stride_, stride_}, {pad, pad});
  }
  return WeightSliceConv2dForward(x, weight,
                                  bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt,
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
  if (!at::GradMode::is_enabled()) {
    const int64_t in = x.size(-1);
    TORCH_CHECK(
        in >= 1 && in <= weight.size(1) && out_features >= 1 && out_features <= weight.size(0),
        "WeightSlice linear: ", in, " -> ", out_features, " features, weight has ", weight.size(1),
        " -> ", weight.size(0));
    const SliceViewCache::Entry& v = views_.Get(weight, bias, in, out_features);
    return at::linear(x, v.weight, v.bias);
  }
  return WeightSliceLinearForward(x, weight, bias, out_features);
}

}  // namespace superserve::ops
