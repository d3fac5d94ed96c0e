// Built instead of torch_executor.cc when SUPERSERVE_WITH_TORCH is OFF: the
// worker then serves only --emulate.
#include "absl/status/status.h"
#include "worker/torch_executor.h"

namespace superserve {

absl::StatusOr<std::unique_ptr<Executor>> MakeTorchExecutor(int, const std::string&) {
  return absl::UnimplementedError(
      "this build has no torch executor (SUPERSERVE_WITH_TORCH=OFF); use --emulate");
}

absl::StatusOr<std::string> FindCheckpoint(const std::string&) {
  return absl::UnimplementedError("this build has no torch executor");
}

}  // namespace superserve
