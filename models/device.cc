#include "models/device.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"

namespace superserve::models {

absl::Status CheckDevice(const std::string& device) {
  c10::Device parsed(c10::kCPU);
  try {
    parsed = c10::Device(device);
  } catch (const c10::Error&) {
    return absl::InvalidArgumentError(
        absl::StrCat("device \"", device, "\": not a device name (cpu, cuda or cuda:N)"));
  }
  if (parsed.is_cpu()) return absl::OkStatus();
  if (!parsed.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device \"", device, "\": only cpu and cuda are supported"));
  }
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device \"", device,
        "\": this LibTorch has no CUDA support or no CUDA GPU is visible (Debian's libtorch is "
        "CPU-only: docs/gpu.md builds the worker against a CUDA LibTorch)"));
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (parsed.has_index() && parsed.index() >= count) {
    return absl::InvalidArgumentError(absl::StrCat("device \"", device, "\": this machine has ",
                                                   count, " CUDA device(s)"));
  }
  return absl::OkStatus();
}

absl::Status MoveModule(torch::nn::Module& module, const std::string& device,
                        const std::string& what) {
  if (auto st = CheckDevice(device); !st.ok()) return st;
  try {
    module.to(c10::Device(device));
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("moving ", what, " to ", device, ": ", e.what_without_backtrace()));
  }
}

void SynchronizeDevice(const std::string& device) {
  if (device.rfind("cuda", 0) != 0) return;
  c10::Device d(device);
  torch::cuda::synchronize(d.has_index() ? d.index() : -1);
}

}  // namespace superserve::models
