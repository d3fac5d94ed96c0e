#ifndef SUPERSERVE_WORKER_EMULATED_EXECUTOR_H_
#define SUPERSERVE_WORKER_EMULATED_EXECUTOR_H_

#include <map>
#include <string>

#include "worker/executor.h"

namespace superserve {

// Executes nothing: sleeps the profiled latency of the subnet at the smallest
// profiled batch size >= the batch, and returns deterministic fake logits (a
// one-hot over num_classes picked by a hash of the input bytes). Lets one box
// host many workers for router scale and fault benchmarks.
class EmulatedExecutor final : public Executor {
 public:
  // `slowdown` multiplies every sleep: a straggler at 3x its profile
  // (docs/faults.md, slow worker).
  explicit EmulatedExecutor(double slowdown = 1.0) : slowdown_(slowdown) {}
  std::string_view kind() const override { return "emulated"; }
  absl::Status Load(const ModelEntry& model) override;
  absl::StatusOr<std::vector<HostTensor>> Run(const std::string& model,
                                              const ControlTuple& control,
                                              absl::Span<const v1::Tensor* const> inputs) override;

  // The profiled latency (Run sleeps for slowdown x this); an error for an
  // unknown model/subnet.
  absl::StatusOr<Nanos> EmulatedLatency(const std::string& model, int32_t subnet_id,
                                        size_t batch) const;

 private:
  double slowdown_ = 1.0;
  std::map<std::string, ModelProfile> profiles_;
};

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_EMULATED_EXECUTOR_H_
