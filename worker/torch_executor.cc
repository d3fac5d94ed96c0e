#include "worker/torch_executor.h"

namespace superserve {

absl::StatusOr<std::unique_ptr<Executor>> MakeTorchExecutor(int intra_op_threads) {
  // Wired to models/ (branch issue3) once the supernet API lands.
  return absl::UnimplementedError("the torch executor needs models/ (not merged yet); use --emulate");
}

}  // namespace superserve
