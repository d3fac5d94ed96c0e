#ifndef SUPERSERVE_OPERATORS_WEIGHT_SLICE_H_
#define SUPERSERVE_OPERATORS_WEIGHT_SLICE_H_

// WeightSlice (SuperServe §3): dynamic Conv2d and Linear layers holding the
// supernet's maximum-width weight and running any narrower layer with the
// leading slice of it. OFA trains channels sorted by importance, so a subnet's
// weights are a prefix: [:out_channels, :in_channels]. The active input width
// is the input's own channel count; the active output width is an argument.
//
// Inference (grad mode off) keeps the slices it has made, one per (in, out)
// width pair the layer has run at, so the steady state makes no new tensors.
// On the CPU a slice is a view (metadata only, no weight bytes). On other
// devices a slice whose rows are strided (in < max_in) is kept as a contiguous
// copy instead: cuDNN copies a strided weight on every call, one more kernel
// launch per layer, and a small network on a GPU is launch-bound
// (docs/gpu.md). Slices are rebuilt if the weight's storage moves (e.g. after
// a checkpoint load) and, for copies, if the weight is written in place (its
// version counter moves). With grad mode on, every forward slices afresh so
// autograd sees the slice.

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

namespace superserve::ops {

// Cached [out, in] slices of one weight (and its bias).
class SliceViewCache {
 public:
  struct Entry {
    int64_t in = 0, out = 0;
    torch::Tensor weight, bias;
  };
  // The entry for (in, out), creating it on first use. Bounds are the
  // caller's job.
  const Entry& Get(const torch::Tensor& weight, const torch::Tensor& bias, int64_t in, int64_t out);
  size_t size() const { return entries_.size(); }
  // Contiguous copies for strided slices on every device, the CPU included
  // (default: on non-CPU devices only). Lets CPU tests run the GPU's path.
  void set_copy_strided_slices(bool on) {
    copy_strided_ = on;
    entries_.clear();
  }

 private:
  const void* storage_ = nullptr;
  int64_t version_ = -1;  // the weight's version counter when the copies were made
  bool copy_strided_ = false;
  std::vector<Entry> entries_;
};

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
  SliceViewCache& slices() { return views_; }

 private:
  int64_t stride_;
  SliceViewCache views_;
};
TORCH_MODULE(WeightSliceConv2d);

class WeightSliceLinearImpl : public torch::nn::Module {
 public:
  WeightSliceLinearImpl(int64_t max_in, int64_t max_out);  // torch's default Linear init
  torch::Tensor forward(const torch::Tensor& x, int64_t out_features);

  torch::Tensor weight;  // [max_out, max_in]
  torch::Tensor bias;    // [max_out]
  SliceViewCache& slices() { return views_; }

 private:
  SliceViewCache views_;
};
TORCH_MODULE(WeightSliceLinear);

}  // namespace superserve::ops

#endif  // SUPERSERVE_OPERATORS_WEIGHT_SLICE_H_
