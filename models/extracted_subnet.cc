#include "models/extracted_subnet.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "models/device.h"
#include "models/extracted_subnet_impl.h"

namespace superserve::models {
namespace {

torch::nn::Conv2d DenseConv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

template <typename T>
torch::Tensor VectorTensor(const std::vector<T>& v) {
  if constexpr (std::is_floating_point_v<T>) {
    return torch::tensor(std::vector<float>(v.begin(), v.end()), torch::kFloat32);
  } else {
    return torch::tensor(std::vector<int64_t>(v.begin(), v.end()), torch::kInt64);
  }
}

template <typename T>
std::vector<T> TensorVector(const torch::Tensor& t) {
  std::vector<T> out;
  if (t.numel() == 0) return out;
  if constexpr (std::is_floating_point_v<T>) {
    auto c = t.to(torch::kFloat32).contiguous();
    out.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  } else {
    auto c = t.to(torch::kInt64).contiguous();
    for (int64_t i = 0; i < c.numel(); ++i) out.push_back(static_cast<T>(c.data_ptr<int64_t>()[i]));
  }
  return out;
}

template <typename T>
std::vector<T> ReadVector(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t);
  return TensorVector<T>(t);
}

}  // namespace

DenseBottleneckImpl::DenseBottleneckImpl(const BlockShape& s) : stride(s.stride) {
  conv1 = register_module("conv1", DenseConv(s.in_channels, s.mid_channels, 1, 1));
  norm1 = register_module("norm1", torch::nn::BatchNorm2d(s.mid_channels));
  conv2 = register_module("conv2", DenseConv(s.mid_channels, s.mid_channels, 3, s.stride));
  norm2 = register_module("norm2", torch::nn::BatchNorm2d(s.mid_channels));
  conv3 = register_module("conv3", DenseConv(s.mid_channels, s.out_channels, 1, 1));
  norm3 = register_module("norm3", torch::nn::BatchNorm2d(s.out_channels));
  if (s.has_shortcut_conv) {
    shortcut_conv =
        register_module("shortcut_conv", DenseConv(s.in_channels, s.out_channels, 1, 1));
    shortcut_norm = register_module("shortcut_norm", torch::nn::BatchNorm2d(s.out_channels));
  }
}

torch::Tensor DenseBottleneckImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = torch::relu(norm1(conv1(x)));
  h = torch::relu(norm2(conv2(h)));
  h = norm3(conv3(h));
  torch::Tensor shortcut = x;
  if (shortcut_conv) {
    torch::Tensor pooled = stride > 1
                               ? torch::avg_pool2d(x, {stride, stride}, {stride, stride}, {0, 0},
                                                   /*ceil_mode=*/true, /*count_include_pad=*/false)
                               : x;
    shortcut = shortcut_norm(shortcut_conv(pooled));
  }
  return torch::relu(h + shortcut);
}

DenseResNetImpl::DenseResNetImpl(const OfaResNetConfig& config, const ControlTuple& arch)
    : stem_max_pool(config.stem_max_pool) {
  ArchitectureShape shape = ShapeOf(config, arch);
  stem_conv = register_module(
      "stem_conv", DenseConv(config.input_channels, shape.stem_channels, 3, config.stem_stride));
  stem_norm = register_module("stem_norm", torch::nn::BatchNorm2d(shape.stem_channels));
  for (const BlockShape& b : shape.blocks) {
    if (!b.active) continue;
    blocks.push_back(register_module(absl::StrCat("block", blocks.size()), DenseBottleneck(b)));
  }
  classifier =
      register_module("classifier", torch::nn::Linear(shape.final_channels, config.num_classes));
}

torch::Tensor DenseResNetImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = torch::relu(stem_norm(stem_conv(x)));
  if (stem_max_pool) h = torch::max_pool2d(h, {3, 3}, {2, 2}, {1, 1});
  for (auto& block : blocks) h = block(h);
  return classifier(h.mean({2, 3}));
}

void WriteConfig(torch::serialize::OutputArchive& a, const OfaResNetConfig& c) {
  a.write("config/ints",
          VectorTensor(std::vector<int64_t>{c.input_channels, c.input_size, c.num_classes,
                                            c.stem_width, c.stem_stride, c.stem_max_pool ? 1 : 0,
                                            static_cast<int64_t>(c.statistics_precision)}));
  a.write("config/base_depths", VectorTensor(c.base_depths));
  a.write("config/stage_widths", VectorTensor(c.stage_widths));
  a.write("config/stage_strides", VectorTensor(c.stage_strides));
  a.write("config/depth_choices", VectorTensor(c.depth_choices));
  a.write("config/expand_ratio_choices", VectorTensor(c.expand_ratio_choices));
  a.write("config/width_multiplier_choices", VectorTensor(c.width_multiplier_choices));
}

OfaResNetConfig ReadConfig(torch::serialize::InputArchive& a) {
  OfaResNetConfig c;
  auto ints = ReadVector<int64_t>(a, "config/ints");
  TORCH_CHECK(ints.size() == 6 || ints.size() == 7, "checkpoint: bad config/ints");
  c.input_channels = ints[0];
  c.input_size = ints[1];
  c.num_classes = ints[2];
  c.stem_width = ints[3];
  c.stem_stride = ints[4];
  c.stem_max_pool = ints[5] != 0;
  c.statistics_precision = ints.size() > 6 && ints[6] == 1 ? StatisticsPrecision::kFloat16
                                                           : StatisticsPrecision::kFloat32;
  c.base_depths = ReadVector<int64_t>(a, "config/base_depths");
  c.stage_widths = ReadVector<int64_t>(a, "config/stage_widths");
  c.stage_strides = ReadVector<int64_t>(a, "config/stage_strides");
  c.depth_choices = ReadVector<int32_t>(a, "config/depth_choices");
  c.expand_ratio_choices = ReadVector<float>(a, "config/expand_ratio_choices");
  c.width_multiplier_choices = ReadVector<float>(a, "config/width_multiplier_choices");
  return c;
}

void WriteControlTuple(torch::serialize::OutputArchive& a, const std::string& key,
                       const ControlTuple& t) {
  a.write(key + "/subnet_id", VectorTensor(std::vector<int64_t>{t.subnet_id}));
  a.write(key + "/depths", VectorTensor(t.depths));
  a.write(key + "/expand_ratios", VectorTensor(t.expand_ratios));
  a.write(key + "/width_multipliers", VectorTensor(t.width_multipliers));
  a.write(key + "/kernel_sizes", VectorTensor(t.kernel_sizes));
}

ControlTuple ReadControlTuple(torch::serialize::InputArchive& a, const std::string& key) {
  ControlTuple t;
  auto id = ReadVector<int64_t>(a, key + "/subnet_id");
  TORCH_CHECK(id.size() == 1, "checkpoint: bad ", key, "/subnet_id");
  t.subnet_id = static_cast<int32_t>(id[0]);
  t.depths = ReadVector<int32_t>(a, key + "/depths");
  t.expand_ratios = ReadVector<float>(a, key + "/expand_ratios");
  t.width_multipliers = ReadVector<float>(a, key + "/width_multipliers");
  t.kernel_sizes = ReadVector<int32_t>(a, key + "/kernel_sizes");
  return t;
}

ExtractedSubnet::ExtractedSubnet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExtractedSubnet::~ExtractedSubnet() = default;

at::Tensor ExtractedSubnet::Forward(const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  return impl_->net->forward(x);
}

absl::Status ExtractedSubnet::MoveTo(const std::string& device) {
  return MoveModule(*impl_->net, device, "extracted subnet");
}

absl::Status ExtractedSubnet::Save(const std::string& path) const {
  try {
    torch::serialize::OutputArchive archive;
    WriteConfig(archive, impl_->config);
    WriteControlTuple(archive, "architecture", impl_->architecture);
    torch::serialize::OutputArchive net;
    impl_->net->save(net);
    archive.write("net", net);
    archive.save_to(path);
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("saving extracted subnet to ", path, ": ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::unique_ptr<ExtractedSubnet>> ExtractedSubnet::Load(const std::string& path) {
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    OfaResNetConfig config = ReadConfig(archive);
    ControlTuple arch = ReadControlTuple(archive, "architecture");
    if (auto s = ValidateConfig(config); !s.ok()) return s;
    if (auto s = ValidateArchitecture(config, arch); !s.ok()) return s;
    auto impl = std::make_unique<Impl>(config, arch);
    torch::serialize::InputArchive net;
    archive.read("net", net);
    impl->net->load(net);
    impl->net->eval();
    return std::make_unique<ExtractedSubnet>(std::move(impl));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("loading extracted subnet from ", path, ": ", e.what_without_backtrace()));
  }
}

int64_t ExtractedSubnet::ResidentBytes() const {
  int64_t bytes = 0;
  for (const auto& p : impl_->net->parameters()) bytes += p.nbytes();
  for (const auto& b : impl_->net->buffers()) bytes += b.nbytes();
  return bytes;
}

const OfaResNetConfig& ExtractedSubnet::config() const { return impl_->config; }
const ControlTuple& ExtractedSubnet::architecture() const { return impl_->architecture; }

}  // namespace superserve::models
