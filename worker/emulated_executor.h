#ifndef SUPERSERVE_WORKER_EMULATED_EXECUTOR_H_
#define SUPERSERVE_WORKER_EMULATED_EXECUTOR_H_

#include <map>
#include <mutex>
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "common/empirical_distribution.h"
#include "worker/executor.h"

namespace superserve {

// Executes nothing: sleeps the profiled latency of the subnet at the smallest
// profiled batch size >= the batch, and returns deterministic fake logits (a
// one-hot over num_classes picked by a hash of the input bytes). Lets one box
// host many workers for router scale and fault benchmarks. Loading a model
// takes its profile's load_ms (x slowdown) and its footprint is the
// profile's memory_bytes.
//
// Dynamic models (a profile with a `dynamic` block) are emulated as the
// simulator does: each query's own time l is drawn (seeded) from its
// application's histogram (an application the profile does not name: from
// the applications' mixture, weighted by their counts), and the batch sleeps
// c0 + c1·k·max(l). Each query reports l as its own time and
// c0 + c1·k·l as the moment it left; its exit is not known (-1).
class EmulatedExecutor final : public Executor {
 public:
  // `slowdown` multiplies every sleep: a straggler at 3x its profile
  // (docs/faults.md, slow worker). `seed` seeds dynamic models' draws.
  explicit EmulatedExecutor(double slowdown = 1.0, uint64_t seed = 1)
      : slowdown_(slowdown), rng_(seed) {}
  std::string_view kind() const override { return "emulated"; }
  absl::Status Load(const ModelEntry& model) override;
  absl::Status Unload(const std::string& model) override;
  // What the profile states (memory_bytes): nothing is loaded to measure.
  int64_t ResidentBytes(const std::string& model) override;
  absl::StatusOr<std::vector<HostTensor>> Run(const std::string& model,
                                              const ControlTuple& control,
                                              absl::Span<const v1::Tensor* const> inputs) override;
  absl::StatusOr<std::vector<HostTensor>> RunWithExits(
      const std::string& model, const ControlTuple& control,
      absl::Span<const v1::Tensor* const> inputs, absl::Span<const std::string* const> applications,
      std::vector<QueryExit>* exits) override;

  // The profiled latency (Run sleeps for slowdown x this); an error for an
  // unknown model/subnet.
  absl::StatusOr<Nanos> EmulatedLatency(const std::string& model, int32_t subnet_id,
                                        size_t batch) const;

 private:
  struct DynamicModel {
    double c0_us = 0, c1 = 1;
    std::map<std::string, EmpiricalDistribution, std::less<>> applications;
    EmpiricalDistribution mix = EmpiricalDistribution::Constant(0);
    // Load-adaptive exits: per threshold of the profile, its applications'
    // histograms (a batch's ControlTuple::exit_threshold picks one).
    std::map<float, std::map<std::string, EmpiricalDistribution, std::less<>>> at_threshold;
  };
  std::vector<HostTensor> FakeLogits(const std::string& model,
                                     absl::Span<const v1::Tensor* const> inputs);

  double slowdown_ = 1.0;
  // Load may run on another thread than Run (a hot registration).
  mutable std::mutex mu_;
  std::map<std::string, ModelProfile> profiles_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, DynamicModel> dynamic_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_;
};

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_EMULATED_EXECUTOR_H_
