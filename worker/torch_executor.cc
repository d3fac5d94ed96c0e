#include "worker/torch_executor.h"

#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/device.h"
#include "models/ofa_resnet.h"
#include "models/scripted_supernet.h"
#include "worker/early_exit_host.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;

// The profile family of models/early_exit.h's networks.
constexpr char kEarlyExitFamily[] = "early_exit";
// The family of models/ofa_resnet.h's supernets (the default).
constexpr char kOfaResNetFamily[] = "ofa_resnet";
// The family of a supernet exported from PyTorch (models/scripted_supernet.h).
constexpr char kTorchScriptFamily[] = "torchscript";

// What Run needs of a supernet, whichever family built it: actuate a control
// tuple in place, then run a batch through it.
class Servable {
 public:
  virtual ~Servable() = default;
  virtual absl::Status Actuate(const ControlTuple& control) = 0;
  virtual absl::StatusOr<at::Tensor> Infer(const at::Tensor& x) = 0;
  virtual absl::Status MoveTo(const std::string& device) = 0;
  // Bytes of its parameters and buffers (the footprint placement counts).
  virtual int64_t ResidentBytes() const = 0;
};

template <class Net>
class ServableNet final : public Servable {
 public:
  explicit ServableNet(std::unique_ptr<Net> net) : net_(std::move(net)) {}
  absl::Status Actuate(const ControlTuple& control) override { return net_->Actuate(control); }
  absl::StatusOr<at::Tensor> Infer(const at::Tensor& x) override { return net_->Infer(x); }
  absl::Status MoveTo(const std::string& device) override { return net_->MoveTo(device); }
  int64_t ResidentBytes() const override { return net_->ResidentBytes(); }

 private:
  std::unique_ptr<Net> net_;
};

// Loads `model`'s supernet from `path` in inference mode on `device`. An
// OFA-ResNet checkpoint must have the shape its manifest's "architecture"
// states.
absl::StatusOr<std::unique_ptr<Servable>> LoadServable(const ModelEntry& model,
                                                       const std::string& path,
                                                       const std::string& device) {
  std::unique_ptr<Servable> servable;
  if (model.profile.family == kTorchScriptFamily) {
    auto net = models::ScriptedSupernet::Load(path);
    if (!net.ok()) return net.status();
    servable = std::make_unique<ServableNet<models::ScriptedSupernet>>(*std::move(net));
    if (auto st = servable->MoveTo(device); !st.ok()) return st;
    return servable;
  }
  auto net = models::OfaResNet::Load(path);
  if (!net.ok()) return net.status();
  if (model.manifest.has_value()) {
    if (auto st = models::CheckManifestArchitecture((*net)->config(),
                                                    model.manifest->architecture_json);
        !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(st.message(), " (", path, ")"));
    }
  }
  (*net)->Eval();
  servable = std::make_unique<ServableNet<models::OfaResNet>>(*std::move(net));
  if (auto st = servable->MoveTo(device); !st.ok()) return st;
  return servable;
}

class TorchExecutor final : public Executor {
 public:
  explicit TorchExecutor(std::string device) : device_(std::move(device)) {}

  std::string_view kind() const override { return "torch"; }

  // The executor boundary for loads, as RunCatchingExceptions is for
  // batches (worker/batch_runner.cc): whatever LibTorch throws while loading
  // a package (a hostile one included) becomes a status naming the model,
  // never an exception that ends the worker (at start-up, or on the loader
  // thread of a hot registration, where it took every other model down).
  absl::Status Load(const ModelEntry& model) override {
    std::string why;
    try {
      return LoadUnguarded(model);
    } catch (const c10::Error& e) {
      why = e.what_without_backtrace();
    } catch (const std::exception& e) {
      why = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);  // nothing half-loaded stays
      models_.erase(model.name);
      early_exit_.erase(model.name);
    }
    return absl::InternalError(absl::StrCat("model ", model.name, ": loading threw: ", why));
  }

  absl::Status LoadUnguarded(const ModelEntry& model) {
    // A family this executor does not build (an emulated package sent to a
    // torch worker) was loaded as an OfaResNet and refused for a missing or
    // unreadable checkpoint, which named the wrong problem. An empty family
    // (older profiles) is an OfaResNet.
    const std::string& family = model.profile.family;
    if (!family.empty() && family != kOfaResNetFamily && family != kTorchScriptFamily &&
        family != kEarlyExitFamily) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", model.name, ": family \"", family, "\" is not one the torch executor serves (",
          kOfaResNetFamily, ", ", kTorchScriptFamily, ", ", kEarlyExitFamily,
          family == "emulated" ? "); an emulated model needs an emulated worker (--emulate)" : ")"));
    }
    // A package's manifest names its checkpoint (validated to exist when the
    // package was loaded); the older layout is searched.
    auto path = model.manifest.has_value() && !model.manifest->checkpoint.empty()
                    ? absl::StatusOr<std::string>(
                          (fs::path(model.directory) / model.manifest->checkpoint).string())
                    : FindCheckpoint(model.directory);
    if (!path.ok()) return path.status();
    if (model.profile.family == kEarlyExitFamily) {
      auto host = EarlyExitHost::Load(model, *path, device_);
      if (!host.ok()) return host.status();
      std::lock_guard<std::mutex> lock(mu_);
      early_exit_[model.name] = *std::move(host);
      return absl::OkStatus();
    }
    auto net = LoadServable(model, *path, device_);
    if (!net.ok()) return net.status();
    // Every subnet the router may ask for must actuate: fail at load time,
    // not on the first batch (a scripted module checks its arguments when it
    // runs: the warm-up below runs every subnet).
    for (const auto& s : model.profile.subnets) {
      if (auto st = (*net)->Actuate(s.control); !st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("model ", model.name, " subnet id ", s.id,
                                                       " does not actuate on ", *path, ": ",
                                                       st.message()));
      }
    }
    Loaded l;
    l.net = *std::move(net);
    l.checkpoint = *path;
    l.input_shape = model.profile.input_shape;
    l.input_mean = model.profile.input_mean;
    l.input_std = model.profile.input_std;
    l.batch_sizes = model.profile.batch_sizes;
    l.entry = model;
    {
      std::lock_guard<std::mutex> lock(mu_);
      models_[model.name] = std::move(l);
    }
    // Warm-up: one run per (subnet, batch size) before registering, so that
    // first-call allocations and thread-pool start-up do not land on served
    // queries (the first batches otherwise take several times their profile).
    // Run() pads every batch to a profiled size, so these are the only shapes
    // that will ever run.
    if (auto st = WarmUp(model); !st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      models_.erase(model.name);
      return st;
    }
    return absl::OkStatus();
  }

  // LibTorch keeps some CUDA state per thread and makes it on first use: the
  // cuDNN/cuBLAS handles and, as far as we can tell, cuDNN's execution plans
  // (one per convolution shape). Load's warm-up ran on another thread, and on
  // an H200 a worker's first served batch took 23-27 ms against ~1.2 ms
  // after; with the handles made here, batches of shapes not yet served
  // still took 50-100 ms (late answers, which the router's estimates then
  // learned; docs/gpu.md). So off the CPU every model loaded so far is warmed
  // up again here, on the serving thread, once per thread (not yet measured
  // on a GPU). The CPU has no such state.
  void PrepareThread() override {
    if (c10::Device(device_).is_cpu()) return;
    // (executor, model) pairs warmed on this thread; a thread serves one
    // worker session, and a new session's thread starts empty.
    thread_local std::set<std::pair<const TorchExecutor*, std::string>> warmed;
    std::vector<ModelEntry> todo;
    std::vector<std::pair<std::string, EarlyExitHost*>> todo_exit;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [name, loaded] : models_) {
        if (!warmed.count({this, name})) todo.push_back(loaded.entry);
      }
      for (const auto& [name, host] : early_exit_) {
        if (!warmed.count({this, name})) todo_exit.emplace_back(name, host.get());
      }
    }
    try {
      c10::InferenceMode guard;
      const auto options = torch::TensorOptions().device(c10::Device(device_));
      (void)torch::conv2d(torch::zeros({1, 1, 8, 8}, options), torch::zeros({1, 1, 3, 3}, options));
      (void)torch::mm(torch::zeros({8, 8}, options), torch::zeros({8, 8}, options));
      models::SynchronizeDevice(device_);
    } catch (const c10::Error&) {
      // The first batch then pays it, and reports any real device error.
    }
    // A failure here already failed at load; a batch would report it.
    for (const ModelEntry& m : todo) {
      (void)WarmUp(m);
      warmed.insert({this, m.name});
    }
    for (const auto& [name, host] : todo_exit) {
      try {
        c10::InferenceMode guard;
        (void)host->WarmUp();
      } catch (const c10::Error&) {
      }
      warmed.insert({this, name});
    }
  }

  // One run of every (subnet, batch size) of a loaded supernet, on this thread.
  absl::Status WarmUp(const ModelEntry& model) {
    int64_t sample = 1;
    for (int64_t d : model.profile.input_shape) sample *= d;
    v1::Tensor zeros;
    EncodeTensor(MakeFloatTensor(model.profile.input_shape, std::vector<float>(sample, 0.f)),
                 &zeros);
    for (const auto& s : model.profile.subnets) {
      for (int32_t b : model.profile.batch_sizes) {
        std::vector<const v1::Tensor*> inputs(b, &zeros);
        if (auto out = Run(model.name, s.control, inputs); !out.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("model ", model.name, " subnet id ", s.id,
                                                         " at batch ", b, " fails its warm-up: ",
                                                         out.status().message()));
        }
      }
    }
    return absl::OkStatus();
  }

  // Measured once the weights are on the device: what Load put there.
  int64_t ResidentBytes(const std::string& model) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = models_.find(model); it != models_.end()) return it->second.net->ResidentBytes();
    if (auto it = early_exit_.find(model); it != early_exit_.end()) {
      return it->second->ResidentBytes();
    }
    return 0;
  }

  // Drops the module and its tensors (LibTorch frees them with the last
  // reference).
  absl::Status Unload(const std::string& model) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (models_.erase(model) + early_exit_.erase(model) == 0) {
      return absl::NotFoundError(absl::StrCat("model ", model, " not loaded"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<HostTensor>> RunWithExits(
      const std::string& model, const ControlTuple& control,
      absl::Span<const v1::Tensor* const> inputs, absl::Span<const std::string* const> applications,
      std::vector<QueryExit>* exits) override {
    exits->clear();
    if (EarlyExitHost* host = FindEarlyExit(model); host != nullptr) {
      try {
        c10::InferenceMode guard;
        return host->Run(inputs, exits, control.exit_threshold);
      } catch (const c10::Error& e) {
        return absl::InternalError(absl::StrCat("torch: ", e.what_without_backtrace()));
      }
    }
    return Run(model, control, inputs);
  }

  absl::StatusOr<std::vector<HostTensor>> Run(const std::string& model,
                                              const ControlTuple& control,
                                              absl::Span<const v1::Tensor* const> inputs) override {
    if (FindEarlyExit(model) != nullptr) {
      std::vector<QueryExit> ignored;
      return RunWithExits(model, control, inputs, {}, &ignored);
    }
    Loaded* found = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = models_.find(model); it != models_.end()) found = &it->second;
    }
    if (found == nullptr) return absl::NotFoundError(absl::StrCat("model ", model, " not loaded"));
    Loaded& m = *found;
    try {
      c10::InferenceMode guard;
      // Padded with zero rows up to the smallest profiled batch size that
      // holds it: that shape was warmed up at load and is what the profile
      // (and so the policy's estimate for this batch) measured. Unprofiled
      // sizes would each pay oneDNN's first-run primitive creation, several
      // times the batch's own cost on these small layers.
      const int64_t padded = PaddedBatch(m.batch_sizes, static_cast<int64_t>(inputs.size()));
      std::vector<int64_t> shape = {padded};
      shape.insert(shape.end(), m.input_shape.begin(), m.input_shape.end());
      torch::Tensor x = torch::empty(shape, torch::kFloat32);
      const size_t sample_bytes = x.nbytes() / padded;
      char* dst = static_cast<char*>(x.data_ptr());
      std::memset(dst + inputs.size() * sample_bytes, 0, (padded - inputs.size()) * sample_bytes);
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i]->data().size() != sample_bytes) {
          return absl::InvalidArgumentError(absl::StrCat("input ", i, " has ", inputs[i]->data().size(),
                                                         " bytes, expected ", sample_bytes));
        }
        std::memcpy(dst + i * sample_bytes, inputs[i]->data().data(), sample_bytes);
      }
      // The model's own input normalisation (from its profile): clients send
      // plain values, the network sees what it was trained on.
      if (m.input_mean != 0.f || m.input_std != 1.f) x.sub_(m.input_mean).div_(m.input_std);
      // Actuation is integer bookkeeping only (SubNetAct): cheap per batch.
      if (auto st = m.net->Actuate(control); !st.ok()) return st;
      auto logits = m.net->Infer(x);
      if (!logits.ok()) return logits.status();
      // What the module returned must be logits [padded, classes] of real
      // numbers, `classes` being the profile's (the router advertises that
      // shape; a scripted module or a checkpoint may disagree with it).
      if (auto st = CheckLogits(*logits, padded, m); !st.ok()) return st;
      // Back on the host (on a GPU this copy is where the batch finishes).
      torch::Tensor out = logits->to(torch::kCPU, torch::kFloat32).contiguous();
      const int64_t classes = out.size(1);
      const float* p = out.data_ptr<float>();
      std::vector<HostTensor> result;
      result.reserve(inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) {
        result.push_back(MakeFloatTensor({classes}, absl::MakeConstSpan(p + i * classes, classes)));
      }
      return result;
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("torch: ", e.what_without_backtrace()));
    }
  }

 private:
  struct Loaded {
    std::unique_ptr<Servable> net;
    std::string checkpoint;  // the file it was loaded from (errors name it)
    std::vector<int64_t> input_shape;
    float input_mean = 0.f;
    float input_std = 1.f;
    std::vector<int32_t> batch_sizes;  // the profile's, ascending
    ModelEntry entry;                  // what it was loaded from (warm-ups)
  };

  // A batch's output as the module returned it, before any conversion.
  static absl::Status CheckLogits(const at::Tensor& t, int64_t rows, const Loaded& m) {
    const int64_t classes = m.entry.profile.num_classes;
    const std::string want =
        classes > 0 ? absl::StrCat("[", rows, ", ", classes, "]") : absl::StrCat("[", rows, ", C]");
    auto fail = [&](const std::string& what) {
      return absl::InternalError(absl::StrCat("model ", m.entry.name, " (", m.checkpoint,
                                              ") returned ", what, " for a batch of ", rows,
                                              "; logits must be ", want,
                                              " of real numbers (profile.json's num_classes)"));
    };
    if (!t.defined()) return fail("an undefined tensor");
    if (t.is_complex()) return fail(absl::StrCat("a ", c10::toString(t.scalar_type()), " tensor"));
    std::vector<int64_t> shape = t.sizes().vec();
    if (shape.size() != 2 || shape[0] != rows || (classes > 0 && shape[1] != classes)) {
      std::string s = "shape [";
      for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&s, i ? ", " : "", shape[i]);
      return fail(s + "]");
    }
    return absl::OkStatus();
  }

  static int64_t PaddedBatch(const std::vector<int32_t>& sizes, int64_t n) {
    for (int32_t b : sizes) {
      if (b >= n) return b;
    }
    return n;  // beyond the profile: run as is
  }
  // Entries are erased only by Unload, which the worker calls on the thread
  // that runs batches; Load may run on another (a hot registration).
  EarlyExitHost* FindEarlyExit(const std::string& model) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = early_exit_.find(model);
    return it == early_exit_.end() ? nullptr : it->second.get();
  }
  const std::string device_;  // where every model's weights live and batches run
  std::mutex mu_;
  std::map<std::string, Loaded> models_;
  // Dynamic models (family "early_exit"), each on its own host.
  std::map<std::string, std::unique_ptr<EarlyExitHost>> early_exit_;
};

}  // namespace

absl::StatusOr<std::string> FindCheckpoint(const std::string& model_directory) {
  for (const char* name : {"supernet.pt", "checkpoint.pt"}) {
    fs::path p = fs::path(model_directory) / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(model_directory, ec)) {
    if (e.path().extension() == ".pt") found.push_back(e.path().string());
  }
  if (found.size() == 1) return found.front();
  return absl::NotFoundError(absl::StrCat(
      "model directory ", model_directory, ": no supernet.pt / checkpoint.pt (found ",
      found.size(), " *.pt files)"));
}

absl::StatusOr<std::unique_ptr<Executor>> MakeTorchExecutor(int intra_op_threads,
                                                            const std::string& device) {
  if (auto st = models::CheckDevice(device); !st.ok()) return st;
  torch::set_num_threads(std::max(1, intra_op_threads));
  return std::make_unique<TorchExecutor>(device);
}

}  // namespace superserve
