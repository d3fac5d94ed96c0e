#ifndef SUPERSERVE_OPERATORS_WEIGHT_SLICE_H_
#define SUPERSERVE_OPERATORS_WEIGHT_SLICE_H_

// WeightSlice (SuperServe §3): dynamic Conv2d and Linear layers holding the
// supernet's maximum-width weight and running any narrower layer with the
// leading slice of it. OFA trains channels sorted by importance, so a subnet's
// weights are a prefix: [:out_channels, :in_channels]. The active input width
// is the input's own channel count; the active output width is an argument.

#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace superserve::ops {

class WeightSliceConv2dImpl : public torch::nn::Module {
 public:
  // Weight [max_out, max_in, kernel, kernel], Kaiming-normal (fan_out) init as
  // OFA; padding kernel/2.
  WeightSliceConv2dImpl(int64_t max_in, int64_t max_out, int64_t kernel, int64_t stride,
                        bool with_bias = false);
  torch::Tensor forward(const torch::Tensor& x, int64_t out_channels);

  int64_t max_in() const { return weight.size(1); }
  int64_t max_out() const { return weight.size(0); }
  int64_t kernel() const { return weight.size(2); }
  int64_t stride() const { return stride_; }

  torch::Tensor weight;
  torch::Tensor bias;  // undefined unless with_bias

 private:
  int64_t stride_;
};
TORCH_MODULE(WeightSliceConv2d);

class WeightSliceLinearImpl : public torch::nn::Module {
 public:
  WeightSliceLinearImpl(int64_t max_in, int64_t max_out);  // torch's default Linear init
  torch::Tensor forward(const torch::Tensor& x, int64_t out_features);

  torch::Tensor weight;  // [max_out, max_in]
  torch::Tensor bias;    // [max_out]
};
TORCH_MODULE(WeightSliceLinear);

}  // namespace superserve::ops

#endif  // SUPERSERVE_OPERATORS_WEIGHT_SLICE_H_
