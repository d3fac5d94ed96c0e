#include "models/ofa_resnet.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/small_file.h"
#include "models/device.h"
#include "models/extracted_subnet_impl.h"
#include "operators/layer_select.h"
#include "operators/subnet_norm.h"
#include "operators/weight_slice.h"

namespace superserve::models {
namespace {

using ops::NormMode;
using ops::SubnetNorm;
using ops::WeightSliceConv2d;
using ops::WeightSliceLinear;

absl::Status FromTorchError(const c10::Error& e, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", e.what_without_backtrace()));
}

// One bottleneck block at the supernet's maximum widths; forward runs the
// widths of `active`.
c10::ScalarType StatisticsDtype(const OfaResNetConfig& c) {
  return c.statistics_precision == StatisticsPrecision::kFloat16 ? torch::kHalf : torch::kFloat;
}

struct BottleneckImpl : torch::nn::Module {
  BottleneckImpl(const BlockShape& max, c10::ScalarType stats) : stride(max.stride) {
    conv1 = register_module("conv1", WeightSliceConv2d(max.in_channels, max.mid_channels, 1, 1));
    norm1 = register_module("norm1", SubnetNorm(max.mid_channels, 1e-5, stats));
    conv2 = register_module("conv2",
                            WeightSliceConv2d(max.mid_channels, max.mid_channels, 3, max.stride));
    norm2 = register_module("norm2", SubnetNorm(max.mid_channels, 1e-5, stats));
    conv3 = register_module("conv3", WeightSliceConv2d(max.mid_channels, max.out_channels, 1, 1));
    norm3 = register_module("norm3", SubnetNorm(max.out_channels, 1e-5, stats));
    if (max.has_shortcut_conv) {
      shortcut_conv = register_module("shortcut_conv",
                                      WeightSliceConv2d(max.in_channels, max.out_channels, 1, 1));
      shortcut_norm = register_module("shortcut_norm", SubnetNorm(max.out_channels, 1e-5, stats));
    }
  }

  torch::Tensor forward(const torch::Tensor& x, const BlockShape& active, int64_t slot) {
    torch::Tensor h = torch::relu(norm1(conv1(x, active.mid_channels), slot));
    h = torch::relu(norm2(conv2(h, active.mid_channels), slot));
    h = norm3(conv3(h, active.out_channels), slot);
    torch::Tensor shortcut = x;
    if (shortcut_conv) {
      torch::Tensor pooled =
          stride > 1 ? torch::avg_pool2d(x, {stride, stride}, {stride, stride}, {0, 0},
                                         /*ceil_mode=*/true, /*count_include_pad=*/false)
                     : x;
      shortcut = shortcut_norm(shortcut_conv(pooled, active.out_channels), slot);
    }
    return torch::relu(h + shortcut);
  }

  // Norm layers in the fixed order the slot table uses.
  void AppendNorms(std::vector<SubnetNorm>* out) const {
    out->push_back(norm1);
    out->push_back(norm2);
    out->push_back(norm3);
    if (shortcut_norm) out->push_back(shortcut_norm);
  }

  int64_t stride;
  WeightSliceConv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, shortcut_conv{nullptr};
  SubnetNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr}, shortcut_norm{nullptr};
};
TORCH_MODULE(Bottleneck);

using SelectedBottleneck = ops::LayerSelectImpl<Bottleneck>;

struct SupernetImpl : torch::nn::Module {
  explicit SupernetImpl(const OfaResNetConfig& config) : stem_max_pool(config.stem_max_pool) {
    ArchitectureShape max = MaxShape(config);
    stem_conv = register_module(
        "stem_conv",
        WeightSliceConv2d(config.input_channels, max.stem_channels, 3, config.stem_stride));
    stem_norm =
        register_module("stem_norm", SubnetNorm(max.stem_channels, 1e-5, StatisticsDtype(config)));
    for (size_t i = 0; i < max.blocks.size(); ++i) {
      const BlockShape& b = max.blocks[i];
      blocks.push_back(register_module(
          absl::StrCat("block", i),
          ops::MakeLayerSelect(b.index_in_stage, Bottleneck(b, StatisticsDtype(config)))));
    }
    classifier =
        register_module("classifier", WeightSliceLinear(max.final_channels, config.num_classes));
    norms.push_back(stem_norm);
    for (auto& b : blocks) b->block()->AppendNorms(&norms);
  }

  torch::Tensor forward(const torch::Tensor& x, const ArchitectureShape& shape,
                        const std::vector<int64_t>& stage_depths, int64_t slot,
                        int64_t num_classes) {
    torch::Tensor h = torch::relu(stem_norm(stem_conv(x, shape.stem_channels), slot));
    if (stem_max_pool) h = torch::max_pool2d(h, {3, 3}, {2, 2}, {1, 1});
    for (size_t i = 0; i < blocks.size(); ++i) {
      const BlockShape& b = shape.blocks[i];
      h = blocks[i]->forward(h, stage_depths[b.stage], b, slot);
    }
    return classifier(h.mean({2, 3}), num_classes);
  }

  // Per norm layer (order of `norms`), the channels it normalises in `shape`
  // (0 where the layer is skipped).
  std::vector<int64_t> NormChannels(const ArchitectureShape& shape) const {
    std::vector<int64_t> c = {shape.stem_channels};
    for (const BlockShape& b : shape.blocks) {
      int64_t k = b.active ? 1 : 0;
      c.push_back(k * b.mid_channels);
      c.push_back(k * b.mid_channels);
      c.push_back(k * b.out_channels);
      if (b.has_shortcut_conv) c.push_back(k * b.out_channels);
    }
    return c;
  }

  bool stem_max_pool;
  WeightSliceConv2d stem_conv{nullptr};
  SubnetNorm stem_norm{nullptr};
  std::vector<std::shared_ptr<SelectedBottleneck>> blocks;
  WeightSliceLinear classifier{nullptr};
  std::vector<SubnetNorm> norms;
};
TORCH_MODULE(Supernet);

}  // namespace

struct OfaResNet::Impl {
  explicit Impl(const OfaResNetConfig& c) : config(c), net(c) {}

  std::string device_name = "cpu";
  c10::Device device = c10::kCPU;

  // The active subnet, precomputed at actuation so Forward only reads it.
  void SetActive(const ControlTuple& canonical) {
    active = canonical;
    active_shape = ShapeOf(config, canonical);
    for (int64_t s = 0; s < config.num_stages(); ++s) {
      stage_depths[s] = config.base_depths[s] + canonical.depths[s];
    }
  }

  void SetNormMode(NormMode mode) {
    for (auto& n : net->norms) n->set_mode(mode);
  }

  absl::Status AddSlots(const std::vector<ControlTuple>& archs, bool replace) {
    std::vector<ControlTuple> canonical;
    for (size_t i = 0; i < archs.size(); ++i) {
      if (auto s = ValidateArchitecture(config, archs[i]); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("slot architecture ", i, ": ", s.message()));
      }
      int32_t want = static_cast<int32_t>((replace ? 0 : slots.size()) + i);
      if (archs[i].subnet_id != kNoSlot && archs[i].subnet_id != want) {
        return absl::InvalidArgumentError(absl::StrCat("slot architecture ", i, " has subnet_id ",
                                                       archs[i].subnet_id, ", want ", want,
                                                       " or -1"));
      }
      canonical.push_back(Canonicalize(config, archs[i]));
      canonical.back().subnet_id = want;
    }
    try {
      if (replace) {
        // Per layer, every slot's channel count, then one allocation.
        std::vector<std::vector<int64_t>> per_layer(net->norms.size());
        for (const ControlTuple& a : canonical) {
          auto c = net->NormChannels(ShapeOf(config, a));
          for (size_t l = 0; l < c.size(); ++l) per_layer[l].push_back(c[l]);
        }
        for (size_t l = 0; l < net->norms.size(); ++l) net->norms[l]->ResetSlots(per_layer[l]);
        slots = canonical;
        // The old slot's statistics are gone; the mode stays, and inference
        // refuses to run until the next Actuate names a new slot.
        active.subnet_id = kNoSlot;
      } else {
        for (const ControlTuple& a : canonical) {
          auto c = net->NormChannels(ShapeOf(config, a));
          for (size_t l = 0; l < c.size(); ++l) net->norms[l]->AddSlot(c[l]);
          slots.push_back(a);
        }
      }
    } catch (const c10::Error& e) {
      return FromTorchError(e, "allocating slot statistics");
    }
    return absl::OkStatus();
  }

  OfaResNetConfig config;
  Supernet net;
  std::vector<ControlTuple> slots;  // canonical, subnet_id = index
  ControlTuple active;
  ArchitectureShape active_shape;
  std::vector<int64_t> stage_depths;
  bool training = true;
  int calibrating_slot = kNoSlot;
};

OfaResNet::OfaResNet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OfaResNet::~OfaResNet() = default;

absl::StatusOr<std::unique_ptr<OfaResNet>> OfaResNet::Create(const OfaResNetConfig& config,
                                                             uint64_t seed) {
  if (auto s = ValidateConfig(config); !s.ok()) return s;
  try {
    torch::manual_seed(seed);
    auto impl = std::make_unique<Impl>(config);
    impl->stage_depths.assign(config.num_stages(), 0);
    impl->SetActive(LargestArchitecture(config));
    impl->SetNormMode(NormMode::kBatchStatistics);
    impl->net->train();
    return std::unique_ptr<OfaResNet>(new OfaResNet(std::move(impl)));
  } catch (const c10::Error& e) {
    return FromTorchError(e, "creating OfaResNet");
  }
}

const OfaResNetConfig& OfaResNet::config() const { return impl_->config; }

absl::Status OfaResNet::SetElasticChoices(const OfaResNetConfig& choices) {
  OfaResNetConfig next = impl_->config;
  next.depth_choices = choices.depth_choices;
  next.expand_ratio_choices = choices.expand_ratio_choices;
  next.width_multiplier_choices = choices.width_multiplier_choices;
  if (auto s = ValidateConfig(next); !s.ok()) return s;
  const OfaResNetConfig& now = impl_->config;
  // Same fixed fields as `choices`: a config of another network is a mistake.
  if (choices.input_channels != now.input_channels || choices.input_size != now.input_size ||
      choices.num_classes != now.num_classes || choices.stem_width != now.stem_width ||
      choices.stem_stride != now.stem_stride || choices.stem_max_pool != now.stem_max_pool ||
      choices.base_depths != now.base_depths || choices.stage_widths != now.stage_widths ||
      choices.stage_strides != now.stage_strides) {
    return absl::InvalidArgumentError(
        absl::StrCat("SetElasticChoices: the fixed fields differ (model ", now.DebugString(),
                     ", given ", choices.DebugString(), ")"));
  }
  const ArchitectureShape max_now = MaxShape(now);
  const ArchitectureShape max_next = MaxShape(next);
  bool same = max_now.stem_channels == max_next.stem_channels &&
              max_now.final_channels == max_next.final_channels &&
              max_now.blocks.size() == max_next.blocks.size();
  for (size_t i = 0; same && i < max_now.blocks.size(); ++i) {
    same = max_now.blocks[i].in_channels == max_next.blocks[i].in_channels &&
           max_now.blocks[i].mid_channels == max_next.blocks[i].mid_channels &&
           max_now.blocks[i].out_channels == max_next.blocks[i].out_channels;
  }
  if (!same) {
    return absl::InvalidArgumentError(
        "SetElasticChoices: the largest architecture's shape would change (the weights were "
        "allocated for the current maxima of depth, expand ratio and width)");
  }
  for (const ControlTuple& slot : impl_->slots) {
    if (auto s = ValidateArchitecture(next, slot); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("SetElasticChoices: slot ", slot.subnet_id,
                                                     " would be invalid: ", s.message()));
    }
  }
  impl_->config = next;
  return absl::OkStatus();
}
int OfaResNet::NumSlots() const { return static_cast<int>(impl_->slots.size()); }

absl::Status OfaResNet::SetSlots(const std::vector<ControlTuple>& architectures) {
  if (impl_->calibrating_slot != kNoSlot) {
    return absl::FailedPreconditionError("SetSlots during calibration");
  }
  return impl_->AddSlots(architectures, /*replace=*/true);
}

absl::StatusOr<int> OfaResNet::AddSlot(const ControlTuple& architecture) {
  if (impl_->calibrating_slot != kNoSlot) {
    return absl::FailedPreconditionError("AddSlot during calibration");
  }
  ControlTuple a = architecture;
  a.subnet_id = kNoSlot;
  if (auto s = impl_->AddSlots({a}, /*replace=*/false); !s.ok()) return s;
  return NumSlots() - 1;
}

absl::StatusOr<ControlTuple> OfaResNet::SlotArchitecture(int slot) const {
  if (slot < 0 || slot >= NumSlots()) {
    return absl::NotFoundError(
        absl::StrCat("subnet_id ", slot, " is not a slot (", NumSlots(), " slots)"));
  }
  return impl_->slots[slot];
}

absl::Status OfaResNet::Actuate(const ControlTuple& control) {
  const OfaResNetConfig& c = impl_->config;
  if (auto s = ValidateArchitecture(c, control); !s.ok()) return s;
  if (impl_->calibrating_slot != kNoSlot) {
    return absl::FailedPreconditionError(
        absl::StrCat("calibrating slot ", impl_->calibrating_slot, "; FinishCalibration first"));
  }
  if (control.subnet_id == kNoSlot) {
    if (!impl_->training) {
      return absl::InvalidArgumentError(
          "subnet_id -1 (no slot) is only valid in training mode; inference needs a slot");
    }
  } else {
    if (control.subnet_id < 0 || control.subnet_id >= NumSlots()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "subnet_id ", control.subnet_id, " is not a slot (valid: 0..", NumSlots() - 1, ")"));
    }
    const ControlTuple& slot = impl_->slots[control.subnet_id];
    ControlTuple canonical = Canonicalize(c, control);
    if (canonical.depths != slot.depths || canonical.expand_ratios != slot.expand_ratios ||
        canonical.width_multipliers != slot.width_multipliers) {
      return absl::InvalidArgumentError(
          absl::StrCat("control tuple does not match the architecture of slot ", control.subnet_id,
                       ": got ", canonical.DebugString(), ", slot has ", slot.DebugString()));
    }
    impl_->SetActive(slot);
    return absl::OkStatus();
  }
  impl_->SetActive(Canonicalize(c, control));
  return absl::OkStatus();
}

const ControlTuple& OfaResNet::active() const { return impl_->active; }

at::Tensor OfaResNet::Forward(const at::Tensor& input) {
  Impl& m = *impl_;
  TORCH_CHECK(input.dim() == 4 && input.size(1) == m.config.input_channels,
              "OfaResNet: input must be [N, ", m.config.input_channels, ", H, W], got ",
              input.sizes());
  const at::Tensor x = input.device() == m.device ? input : input.to(m.device);
  if (m.training) {
    return m.net->forward(x, m.active_shape, m.stage_depths, m.active.subnet_id,
                          m.config.num_classes);
  }
  TORCH_CHECK(m.calibrating_slot != kNoSlot || m.active.subnet_id != kNoSlot,
              "OfaResNet: inference needs an actuated slot");
  torch::NoGradGuard no_grad;
  return m.net->forward(x, m.active_shape, m.stage_depths, m.active.subnet_id,
                        m.config.num_classes);
}

absl::StatusOr<at::Tensor> OfaResNet::Infer(const at::Tensor& x) {
  try {
    return Forward(x);
  } catch (const c10::Error& e) {
    return FromTorchError(e, "OfaResNet forward");
  }
}

absl::Status OfaResNet::MoveTo(const std::string& device) {
  if (auto st = MoveModule(*impl_->net, device, "OfaResNet"); !st.ok()) return st;
  impl_->device = c10::Device(device);
  impl_->device_name = device;
  return absl::OkStatus();
}

const std::string& OfaResNet::device() const { return impl_->device_name; }

void OfaResNet::Train() {
  if (impl_->calibrating_slot != kNoSlot) return;
  impl_->training = true;
  impl_->SetNormMode(NormMode::kBatchStatistics);
  impl_->net->train();
}

void OfaResNet::Eval() {
  if (impl_->calibrating_slot != kNoSlot) return;
  impl_->training = false;
  impl_->SetNormMode(NormMode::kSlotStatistics);
  impl_->net->eval();
}

bool OfaResNet::is_training() const { return impl_->training; }

absl::Status OfaResNet::BeginCalibration(int slot) {
  if (impl_->calibrating_slot != kNoSlot) {
    return absl::FailedPreconditionError("already calibrating");
  }
  auto arch = SlotArchitecture(slot);
  if (!arch.ok()) return arch.status();
  impl_->SetActive(*arch);
  impl_->training = false;
  impl_->net->eval();
  impl_->SetNormMode(NormMode::kCalibrate);
  for (auto& n : impl_->net->norms) n->BeginCalibration();
  impl_->calibrating_slot = slot;
  return absl::OkStatus();
}

absl::Status OfaResNet::FinishCalibration() {
  const int slot = impl_->calibrating_slot;
  if (slot == kNoSlot) return absl::FailedPreconditionError("not calibrating");
  impl_->calibrating_slot = kNoSlot;
  try {
    for (auto& n : impl_->net->norms) n->FinishCalibration(slot);
  } catch (const c10::Error& e) {
    Eval();
    return FromTorchError(e, absl::StrCat("finishing calibration of slot ", slot));
  }
  Eval();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExtractedSubnet>> OfaResNet::Extract(
    const ControlTuple& control) const {
  const OfaResNetConfig& c = impl_->config;
  if (auto s = ValidateArchitecture(c, control); !s.ok()) return s;
  auto slot_arch = SlotArchitecture(control.subnet_id);
  if (!slot_arch.ok()) return slot_arch.status();
  ControlTuple canonical = Canonicalize(c, control);
  canonical.subnet_id = control.subnet_id;
  if (canonical != *slot_arch) {
    return absl::InvalidArgumentError(
        absl::StrCat("control tuple does not match the architecture of slot ", control.subnet_id));
  }
  const int64_t slot = control.subnet_id;
  try {
    torch::NoGradGuard no_grad;
    auto impl = std::make_unique<ExtractedSubnet::Impl>(c, canonical);
    DenseResNet& dense = impl->net;
    Supernet& net = impl_->net;
    ArchitectureShape shape = ShapeOf(c, canonical);
    auto copy_conv = [](torch::nn::Conv2d& to, const WeightSliceConv2d& from) {
      to->weight.copy_(
          from->weight.narrow(0, 0, to->weight.size(0)).narrow(1, 0, to->weight.size(1)));
    };
    auto copy_norm = [slot](torch::nn::BatchNorm2d& to, const SubnetNorm& from) {
      const int64_t ch = to->weight.size(0);
      to->weight.copy_(from->weight.narrow(0, 0, ch));
      to->bias.copy_(from->bias.narrow(0, 0, ch));
      to->running_mean.copy_(from->SlotMean(slot));
      to->running_var.copy_(from->SlotVar(slot));
    };
    copy_conv(dense->stem_conv, net->stem_conv);
    copy_norm(dense->stem_norm, net->stem_norm);
    size_t next = 0;
    for (size_t i = 0; i < shape.blocks.size(); ++i) {
      if (!shape.blocks[i].active) continue;
      DenseBottleneck& to = dense->blocks[next++];
      Bottleneck& from = net->blocks[i]->block();
      copy_conv(to->conv1, from->conv1);
      copy_norm(to->norm1, from->norm1);
      copy_conv(to->conv2, from->conv2);
      copy_norm(to->norm2, from->norm2);
      copy_conv(to->conv3, from->conv3);
      copy_norm(to->norm3, from->norm3);
      if (from->shortcut_conv) {
        copy_conv(to->shortcut_conv, from->shortcut_conv);
        copy_norm(to->shortcut_norm, from->shortcut_norm);
      }
    }
    auto& fc = dense->classifier;
    fc->weight.copy_(net->classifier->weight.narrow(1, 0, fc->weight.size(1)));
    fc->bias.copy_(net->classifier->bias);
    dense->eval();
    return std::make_unique<ExtractedSubnet>(std::move(impl));
  } catch (const c10::Error& e) {
    return FromTorchError(e, "extracting subnet");
  }
}

absl::Status OfaResNet::Save(const std::string& path) const {
  try {
    torch::serialize::OutputArchive archive;
    WriteConfig(archive, impl_->config);
    archive.write("slots/count", torch::tensor({static_cast<int64_t>(impl_->slots.size())}));
    for (size_t i = 0; i < impl_->slots.size(); ++i) {
      WriteControlTuple(archive, absl::StrCat("slots/", i), impl_->slots[i]);
    }
    torch::serialize::OutputArchive net;
    impl_->net->save(net);
    archive.write("net", net);
    archive.save_to(path);
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("saving OfaResNet to ", path, ": ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::unique_ptr<OfaResNet>> OfaResNet::Load(const std::string& path) {
  // A FIFO would block LibTorch's reader forever (superserve-nas --checkpoint).
  if (auto st = CheckRegularFile(path); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("loading OfaResNet: ", st.message()));
  }
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    OfaResNetConfig config = ReadConfig(archive);
    auto model = Create(config);
    if (!model.ok()) {  // the file named: its config is what is wrong
      return absl::Status(model.status().code(), absl::StrCat("loading OfaResNet from ", path, ": ",
                                                              model.status().message()));
    }
    torch::Tensor count;
    archive.read("slots/count", count);
    std::vector<ControlTuple> slots;
    for (int64_t i = 0; i < count.item<int64_t>(); ++i) {
      slots.push_back(ReadControlTuple(archive, absl::StrCat("slots/", i)));
    }
    if (auto s = (*model)->SetSlots(slots); !s.ok()) return s;
    torch::serialize::InputArchive net;
    archive.read("net", net);
    (*model)->impl_->net->load(net);
    for (auto& n : (*model)->impl_->net->norms) n->SyncSlotTableFromBuffers();
    (*model)->Eval();  // a checkpoint is loaded to serve; Train() to fine-tune
    return model;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("loading OfaResNet from ", path, ": ", e.what_without_backtrace()));
  }
}

int64_t OfaResNet::ResidentBytes() const {
  int64_t bytes = 0;
  for (const auto& p : impl_->net->parameters()) bytes += p.nbytes();
  for (const auto& b : impl_->net->buffers()) bytes += b.nbytes();
  return bytes;
}

int64_t OfaResNet::StatisticsBytes() const {
  int64_t bytes = 0;
  for (const auto& n : impl_->net->norms) {
    bytes += n->mean_storage.nbytes() + n->var_storage.nbytes() + n->slot_offsets.nbytes() +
             n->slot_channels.nbytes();
  }
  return bytes;
}

torch::nn::Module& OfaResNet::module() { return *impl_->net; }
std::vector<at::Tensor> OfaResNet::Parameters() { return impl_->net->parameters(); }

}  // namespace superserve::models
