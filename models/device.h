#ifndef SUPERSERVE_MODELS_DEVICE_H_
#define SUPERSERVE_MODELS_DEVICE_H_

// Where a served model's weights live and its batches run: "cpu", "cuda" or
// "cuda:N" (the names LibTorch uses). One place checks a name against this
// LibTorch build and this machine, so that the worker's --device error says
// which of the two is missing (Debian's libtorch has no CUDA; docs/gpu.md
// builds against one that has).

#include <string>

#include "absl/status/status.h"

namespace torch::nn {
class Module;
}

namespace superserve::models {

// OK when `device` names a device this process can run on.
absl::Status CheckDevice(const std::string& device);

// CheckDevice, then moves `module`'s parameters and buffers to `device`
// (in place: the module's own tensor handles follow). `what` names the model
// in the error. A refused device moves nothing.
absl::Status MoveModule(torch::nn::Module& module, const std::string& device,
                        const std::string& what);

// Blocks until every queued kernel on `device` has finished (a no-op on the
// CPU). Timings of GPU work call it before reading the clock.
void SynchronizeDevice(const std::string& device);

}  // namespace superserve::models

#endif  // SUPERSERVE_MODELS_DEVICE_H_
