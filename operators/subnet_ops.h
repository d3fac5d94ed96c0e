#ifndef SUPERSERVE_OPERATORS_SUBNET_OPS_H_
#define SUPERSERVE_OPERATORS_SUBNET_OPS_H_

// The functional cores of SubNetAct's operators (SuperServe §3). The
// nn::Module wrappers (weight_slice.h, subnet_norm.h, layer_select.h) and the
// TorchScript custom ops `torch.ops.superserve.*` (registered in
// subnet_ops.cc) both call these, so a scripted module and the C++ module
// compute the same thing. Invalid arguments throw c10::Error (TORCH_CHECK);
// model-level code turns that into absl::Status.
//
// TorchScript schemas (namespace "superserve"):
//   weight_slice_conv2d(Tensor x, Tensor weight, Tensor? bias, int out_channels,
//                       int stride) -> Tensor
//   weight_slice_linear(Tensor x, Tensor weight, Tensor? bias, int out_features) -> Tensor
//   subnet_norm(Tensor x, Tensor weight, Tensor bias, Tensor mean_storage,
//               Tensor var_storage, Tensor slot_offsets, Tensor slot_channels,
//               int slot, float eps) -> Tensor
//   layer_select(int block_index, int active_depth) -> bool

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>

namespace superserve::ops {

// Convolution with the leading [out_channels, x.size(1)] slice of `weight`
// ([max_out, max_in, k, k], k odd, padding k/2). The slice is a view: no
// weight bytes are copied by this code (see docs/subnetact.md for what the
// CPU backend does with it).
at::Tensor WeightSliceConv2dForward(const at::Tensor& x, const at::Tensor& weight,
                                    const c10::optional<at::Tensor>& bias, int64_t out_channels,
                                    int64_t stride);

// Linear layer with the leading [out_features, x.size(-1)] slice of `weight`
// ([max_out, max_in]).
at::Tensor WeightSliceLinearForward(const at::Tensor& x, const at::Tensor& weight,
                                    const c10::optional<at::Tensor>& bias, int64_t out_features);

// Inference normalisation of x ([N, C, ...]) with one slot's statistics:
// mean/var are mean_storage/var_storage[offset, offset + C), affine
// parameters are the shared weight/bias[0, C).
at::Tensor SubnetNormWithStatistics(const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& bias, const at::Tensor& mean_storage,
                                    const at::Tensor& var_storage, int64_t offset, double eps);

// Normalisation with the batch's own statistics (training, calibration).
at::Tensor SubnetNormWithBatchStatistics(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias, double eps);

// LayerSelect's decision: block `block_index` (0-based within its stage) runs
// iff block_index < active_depth.
bool LayerSelectActive(int64_t block_index, int64_t active_depth);

}  // namespace superserve::ops

#endif  // SUPERSERVE_OPERATORS_SUBNET_OPS_H_
