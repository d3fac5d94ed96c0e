#include "models/early_exit.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/small_file.h"
#include "models/device.h"

namespace superserve::models {
namespace {

// An exception's message; LibTorch's without the C++ backtrace it carries
// (a dozen "frame #N" lines that bury the one line that matters).
std::string Message(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

}  // namespace

absl::Status EarlyExitConfig::Validate() const {
  if (in_channels <= 0 || image_size <= 0 || num_classes <= 1) {
    return absl::InvalidArgumentError(
        "early exit: in_channels and image_size must be positive, num_classes > 1");
  }
  if (stage_channels.empty() || stage_channels.size() > 8) {
    return absl::InvalidArgumentError("early exit: 1 to 8 stages");
  }
  int64_t size = image_size;
  for (size_t i = 0; i < stage_channels.size(); ++i) {
    if (stage_channels[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("early exit: stage ", i, " has no channels"));
    }
    if (i + 1 < stage_channels.size()) size /= 2;
    if (size < 1) return absl::InvalidArgumentError("early exit: too many stages for the image size");
  }
  if (!(exit_threshold > 0.f && exit_threshold <= 1.f)) {
    return absl::InvalidArgumentError("early exit: exit_threshold must be in (0, 1]");
  }
  return absl::OkStatus();
}

namespace {

// conv3x3 -> BN -> ReLU, twice; all but the last stage end with 2x2 max pool.
struct StageImpl : torch::nn::Module {
  StageImpl(int64_t in, int64_t out, bool pool)
      : conv1(torch::nn::Conv2dOptions(in, out, 3).padding(1).bias(false)),
        bn1(out),
        conv2(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)),
        bn2(out),
        pool(pool) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = torch::relu(bn1(conv1(x)));
    h = torch::relu(bn2(conv2(h)));
    return pool ? torch::max_pool2d(h, {2, 2}) : h;
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  bool pool;
};
TORCH_MODULE(Stage);

// Average pool to (at most) 4x4, flatten, linear: an exit sees some spatial
// layout, which early exits need to be useful.
struct ExitHeadImpl : torch::nn::Module {
  ExitHeadImpl(int64_t channels, int64_t size, int64_t classes)
      : side(std::min<int64_t>(4, size)), fc(channels * side * side, classes) {
    register_module("fc", fc);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc(torch::adaptive_avg_pool2d(x, {side, side}).flatten(1));
  }
  int64_t side;
  torch::nn::Linear fc;
};
TORCH_MODULE(ExitHead);

struct NetImpl : torch::nn::Module {
  explicit NetImpl(const EarlyExitConfig& c) {
    int64_t in = c.in_channels;
    int64_t size = c.image_size;
    for (size_t i = 0; i < c.stage_channels.size(); ++i) {
      const bool pool = i + 1 < c.stage_channels.size();
      stages.push_back(register_module(absl::StrCat("stage", i), Stage(in, c.stage_channels[i], pool)));
      if (pool) size /= 2;
      exits.push_back(register_module(absl::StrCat("exit", i),
                                      ExitHead(c.stage_channels[i], size, c.num_classes)));
      in = c.stage_channels[i];
    }
  }
  std::vector<Stage> stages;
  std::vector<ExitHead> exits;
};
TORCH_MODULE(Net);

}  // namespace

struct EarlyExitNet::Impl {
  c10::Device device = c10::kCPU;
  EarlyExitConfig config;
  Net net{nullptr};
};

EarlyExitNet::EarlyExitNet() : impl_(std::make_unique<Impl>()) {}
EarlyExitNet::~EarlyExitNet() = default;

absl::StatusOr<std::unique_ptr<EarlyExitNet>> EarlyExitNet::Create(const EarlyExitConfig& config,
                                                                   uint64_t seed) {
  if (auto st = config.Validate(); !st.ok()) return st;
  torch::manual_seed(seed);
  std::unique_ptr<EarlyExitNet> m(new EarlyExitNet());
  m->impl_->config = config;
  m->impl_->net = Net(config);
  m->impl_->net->eval();
  return m;
}

const EarlyExitConfig& EarlyExitNet::config() const { return impl_->config; }
int EarlyExitNet::num_exits() const { return static_cast<int>(impl_->config.stage_channels.size()); }
void EarlyExitNet::set_exit_threshold(float threshold) { impl_->config.exit_threshold = threshold; }

absl::Status EarlyExitNet::MoveTo(const std::string& device) {
  if (auto st = MoveModule(*impl_->net, device, "the early-exit model"); !st.ok()) return st;
  impl_->device = c10::Device(device);
  return absl::OkStatus();
}

void EarlyExitNet::SetTraining(bool training) {
  if (training) {
    impl_->net->train();
  } else {
    impl_->net->eval();
  }
}

std::vector<at::Tensor> EarlyExitNet::Parameters() { return impl_->net->parameters(); }

int64_t EarlyExitNet::ResidentBytes() const {
  int64_t bytes = 0;
  for (const auto& p : impl_->net->parameters()) bytes += p.nbytes();
  for (const auto& b : impl_->net->buffers()) bytes += b.nbytes();
  return bytes;
}

std::vector<at::Tensor> EarlyExitNet::ForwardAllExits(const at::Tensor& x) {
  std::vector<at::Tensor> out;
  // On the weights' device (MoveTo); the logits stay there.
  torch::Tensor h = x.to(impl_->device);
  for (size_t i = 0; i < impl_->net->stages.size(); ++i) {
    h = impl_->net->stages[i]->forward(h);
    out.push_back(impl_->net->exits[i]->forward(h));
  }
  return out;
}

absl::StatusOr<ExitOutputs> EarlyExitNet::Run(const float* input, int64_t n, int max_exit) {
  const EarlyExitConfig& c = impl_->config;
  if (n <= 0) return absl::InvalidArgumentError("early exit: empty batch");
  const int last = max_exit < 0 ? num_exits() - 1 : std::min(max_exit, num_exits() - 1);
  try {
    torch::NoGradGuard no_grad;
    torch::Tensor h = torch::from_blob(const_cast<float*>(input),
                                       {n, c.in_channels, c.image_size, c.image_size},
                                       torch::kFloat)
                          .to(impl_->device);
    ExitOutputs out;
    out.logits.assign(static_cast<size_t>(n * c.num_classes), 0.f);
    out.exit_taken.assign(static_cast<size_t>(n), -1);
    int64_t remaining = n;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i <= last && remaining > 0; ++i) {
      // The whole batch runs each stage (padding semantics): samples that
      // already left ride along; only the ones still in read this exit.
      h = impl_->net->stages[i]->forward(h);
      torch::Tensor on_device = impl_->net->exits[i]->forward(h);
      torch::Tensor confidence =
          std::get<0>(torch::softmax(on_device, 1).max(1)).to(torch::kCPU).contiguous();
      // Copied back per exit: which samples leave decides whether the next
      // stage runs at all (on a GPU this is also where the stage finishes).
      torch::Tensor logits = on_device.to(torch::kCPU).contiguous();
      const float* l = logits.data_ptr<float>();
      const float* conf = confidence.data_ptr<float>();
      for (int64_t s = 0; s < n; ++s) {
        if (out.exit_taken[s] >= 0) continue;
        if (i == last || conf[s] >= c.exit_threshold) {
          out.exit_taken[s] = i;
          std::copy(l + s * c.num_classes, l + (s + 1) * c.num_classes,
                    out.logits.begin() + s * c.num_classes);
          --remaining;
        }
      }
      out.stages_run = i + 1;
      out.exit_reached_ns.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                               start)
              .count());
    }
    return out;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("early exit: ", Message(e)));
  }
}

absl::Status EarlyExitNet::Save(const std::string& path) const {
  try {
    const EarlyExitConfig& c = impl_->config;
    torch::serialize::OutputArchive archive;
    archive.write("config/in_channels", torch::tensor({c.in_channels}));
    archive.write("config/image_size", torch::tensor({c.image_size}));
    archive.write("config/num_classes", torch::tensor({c.num_classes}));
    archive.write("config/stage_channels", torch::tensor(c.stage_channels));
    archive.write("config/exit_threshold", torch::tensor({c.exit_threshold}));
    torch::serialize::OutputArchive net;
    impl_->net->save(net);
    archive.write("net", net);
    archive.save_to(path);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot save ", path, ": ", Message(e)));
  }
}

absl::StatusOr<std::unique_ptr<EarlyExitNet>> EarlyExitNet::Load(const std::string& path) {
  // A FIFO would block LibTorch's reader forever (superserve-early-exit --checkpoint).
  if (auto st = CheckRegularFile(path); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load early-exit checkpoint: ", st.message()));
  }
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    auto read = [&](const char* key) {
      torch::Tensor t;
      archive.read(key, t);
      return t;
    };
    EarlyExitConfig c;
    c.in_channels = read("config/in_channels").item<int64_t>();
    c.image_size = read("config/image_size").item<int64_t>();
    c.num_classes = read("config/num_classes").item<int64_t>();
    torch::Tensor stages = read("config/stage_channels").to(torch::kLong).contiguous();
    c.stage_channels.assign(stages.data_ptr<int64_t>(), stages.data_ptr<int64_t>() + stages.numel());
    c.exit_threshold = read("config/exit_threshold").item<float>();
    auto m = Create(c);
    if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", m.status().message()));
    torch::serialize::InputArchive net;
    archive.read("net", net);
    (*m)->impl_->net->load(net);
    (*m)->impl_->net->eval();
    return m;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load early-exit checkpoint ", path, ": ",
                                                   Message(e)));
  }
}

}  // namespace superserve::models
