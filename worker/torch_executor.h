#ifndef SUPERSERVE_WORKER_TORCH_EXECUTOR_H_
#define SUPERSERVE_WORKER_TORCH_EXECUTOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace superserve {

// The real executor: loads each model's supernet once (models/ OfaResNet,
// the checkpoint found by FindCheckpoint) and, per batch, actuates the
// requested subnet in place (SubNetAct) and runs it with LibTorch on `device`
// ("cpu", or "cuda[:N]" with a CUDA LibTorch; models/device.h), the CPU's
// share with `intra_op_threads` threads. A model of the family "early_exit"
// (models/early_exit.h, a dynamic DNN) runs on an EarlyExitHost instead
// (worker/early_exit_host.h) and reports each query's exit (RunWithExits).
// Torch stays inside the .cc file.
absl::StatusOr<std::unique_ptr<Executor>> MakeTorchExecutor(int intra_op_threads,
                                                            const std::string& device = "cpu");

// The supernet checkpoint of a model directory: supernet.pt, else
// checkpoint.pt, else its only *.pt file.
absl::StatusOr<std::string> FindCheckpoint(const std::string& model_directory);

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_TORCH_EXECUTOR_H_
