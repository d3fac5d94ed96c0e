#ifndef SUPERSERVE_MODELS_EXTRACTED_SUBNET_IMPL_H_
#define SUPERSERVE_MODELS_EXTRACTED_SUBNET_IMPL_H_

// Internal to models/: the dense module behind ExtractedSubnet, shared by
// extracted_subnet.cc and ofa_resnet.cc (which copies weights into it).

#include <torch/torch.h>

#include <vector>

#include "models/extracted_subnet.h"

namespace superserve::models {

struct DenseBottleneckImpl : torch::nn::Module {
  explicit DenseBottleneckImpl(const BlockShape& shape);
  torch::Tensor forward(const torch::Tensor& x);

  int64_t stride;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, shortcut_conv{nullptr};
  torch::nn::BatchNorm2d norm1{nullptr}, norm2{nullptr}, norm3{nullptr}, shortcut_norm{nullptr};
};
TORCH_MODULE(DenseBottleneck);

struct DenseResNetImpl : torch::nn::Module {
  DenseResNetImpl(const OfaResNetConfig& config, const ControlTuple& architecture);
  torch::Tensor forward(const torch::Tensor& x);

  bool stem_max_pool;
  torch::nn::Conv2d stem_conv{nullptr};
  torch::nn::BatchNorm2d stem_norm{nullptr};
  std::vector<DenseBottleneck> blocks;  // active blocks only, in order
  torch::nn::Linear classifier{nullptr};
};
TORCH_MODULE(DenseResNet);

struct ExtractedSubnet::Impl {
  Impl(const OfaResNetConfig& c, const ControlTuple& a) : config(c), architecture(a), net(c, a) {
    net->eval();
  }
  OfaResNetConfig config;
  ControlTuple architecture;
  DenseResNet net;
};

// Serialises a config and a ControlTuple as int/float tensors under `prefix`
// (shared with the supernet's checkpoint format).
void WriteConfig(torch::serialize::OutputArchive& archive, const OfaResNetConfig& config);
OfaResNetConfig ReadConfig(torch::serialize::InputArchive& archive);
void WriteControlTuple(torch::serialize::OutputArchive& archive, const std::string& key,
                       const ControlTuple& control);
ControlTuple ReadControlTuple(torch::serialize::InputArchive& archive, const std::string& key);

}  // namespace superserve::models

#endif  // SUPERSERVE_MODELS_EXTRACTED_SUBNET_IMPL_H_
