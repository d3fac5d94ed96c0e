#ifndef SUPERSERVE_WORKER_TORCH_EXECUTOR_H_
#define SUPERSERVE_WORKER_TORCH_EXECUTOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace superserve {

// The real executor: loads each model's supernet once from its model
// directory and, per batch, actuates the requested subnet in place
// (SubNetAct) and runs it with LibTorch. Torch stays inside the .cc file.
absl::StatusOr<std::unique_ptr<Executor>> MakeTorchExecutor(int intra_op_threads);

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_TORCH_EXECUTOR_H_
