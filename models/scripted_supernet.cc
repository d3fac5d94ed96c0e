#include "models/scripted_supernet.h"

#include <torch/script.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/small_file.h"
#include "models/device.h"

namespace superserve::models {
namespace {

// forward's arguments after `self`: name in the contract, expected type.
struct ExpectedArgument {
  const char* name;
  c10::TypePtr type;
};

absl::Status CheckForwardSchema(const torch::jit::Module& module, const std::string& path) {
  auto method = module.find_method("forward");
  if (!method.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the scripted module has no forward"));
  }
  const c10::FunctionSchema& schema = method->function().getSchema();
  const std::vector<ExpectedArgument> expected = {
      {"x", c10::TensorType::get()},
      {"subnet_id", c10::IntType::get()},
      {"depths", c10::ListType::ofInts()},
      {"expand_ratios", c10::ListType::ofFloats()},
      {"width_multipliers", c10::ListType::ofFloats()},
  };
  const auto& args = schema.arguments();  // args[0] is self
  if (args.size() != expected.size() + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": forward takes ", args.size() - 1, " arguments, the torchscript contract is ",
        "forward(x: Tensor, subnet_id: int, depths: List[int], expand_ratios: List[float], "
        "width_multipliers: List[float]) -> Tensor (docs/export.md)"));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const c10::Argument& a = args[i + 1];
    if (!a.type()->isSubtypeOf(*expected[i].type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": forward argument ", i + 1, " (", a.name(), ") is ", a.type()->annotation_str(),
          ", the contract wants ", expected[i].name, ": ", expected[i].type->annotation_str()));
    }
  }
  if (schema.returns().size() != 1 ||
      !schema.returns()[0].type()->isSubtypeOf(*c10::TensorType::get())) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": forward must return one Tensor (the logits)"));
  }
  return absl::OkStatus();
}

}  // namespace

struct ScriptedSupernet::Impl {
  torch::jit::Module module;
  std::string path;  // the archive it was loaded from (errors name it)
  c10::Device device = c10::kCPU;
  // The actuated control, as forward's arguments.
  int64_t subnet_id = -1;
  std::vector<int64_t> depths;
  std::vector<double> expand_ratios;
  std::vector<double> width_multipliers;
};

ScriptedSupernet::ScriptedSupernet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ScriptedSupernet::~ScriptedSupernet() = default;

absl::StatusOr<std::unique_ptr<ScriptedSupernet>> ScriptedSupernet::Load(const std::string& path) {
  // A FIFO would block LibTorch's reader forever.
  if (auto st = CheckRegularFile(path); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a loadable TorchScript module: ", st.message()));
  }
  auto impl = std::make_unique<Impl>();
  // The archive's code is compiled here (and lazily, when forward's schema
  // is first asked for): a syntax error, or an op this process does not
  // register, arrives as torch::jit::ErrorReport, a std::exception that is
  // no c10::Error. It used to escape and abort the worker (SIGABRT).
  try {
    impl->module = torch::jit::load(path, torch::kCPU);
    impl->module.eval();
    impl->path = path;
    if (auto st = CheckForwardSchema(impl->module, path); !st.ok()) return st;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a loadable TorchScript module: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a loadable TorchScript module: ", e.what()));
  }
  return std::unique_ptr<ScriptedSupernet>(new ScriptedSupernet(std::move(impl)));
}

absl::Status ScriptedSupernet::Actuate(const ControlTuple& control) {
  if (control.subnet_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("scripted supernet: subnet_id ", control.subnet_id, " is not a slot"));
  }
  impl_->subnet_id = control.subnet_id;
  impl_->depths.assign(control.depths.begin(), control.depths.end());
  impl_->expand_ratios.assign(control.expand_ratios.begin(), control.expand_ratios.end());
  impl_->width_multipliers.assign(control.width_multipliers.begin(),
                                  control.width_multipliers.end());
  return absl::OkStatus();
}

int64_t ScriptedSupernet::ResidentBytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : impl_->module.parameters()) bytes += p.nbytes();
  for (const at::Tensor& b : impl_->module.buffers()) bytes += b.nbytes();
  return bytes;
}

absl::Status ScriptedSupernet::MoveTo(const std::string& device) {
  if (auto st = CheckDevice(device); !st.ok()) return st;
  try {
    c10::Device d(device);
    impl_->module.to(d);
    impl_->device = d;
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("moving the scripted supernet to ", device, ": ", e.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> ScriptedSupernet::Infer(const at::Tensor& x) {
  if (impl_->subnet_id < 0) {
    return absl::FailedPreconditionError("scripted supernet: Infer before Actuate");
  }
  try {
    std::vector<c10::IValue> args;
    args.reserve(5);
    args.emplace_back(x.device() == impl_->device ? x : x.to(impl_->device));
    args.emplace_back(impl_->subnet_id);
    args.emplace_back(c10::List<int64_t>(impl_->depths));
    args.emplace_back(c10::List<double>(impl_->expand_ratios));
    args.emplace_back(c10::List<double>(impl_->width_multipliers));
    c10::IValue out = impl_->module.forward(std::move(args));
    if (!out.isTensor()) {
      return absl::InternalError(
          absl::StrCat("scripted supernet ", impl_->path, ": forward did not return a Tensor"));
    }
    return out.toTensor();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("scripted supernet ", impl_->path, ": forward failed: ",
                                            e.what_without_backtrace()));
  } catch (const std::exception& e) {
    // TorchScript's raise (e.g. an unknown slot) arrives as a JIT exception.
    return absl::InternalError(
        absl::StrCat("scripted supernet ", impl_->path, ": forward failed: ", e.what()));
  }
}

}  // namespace superserve::models
