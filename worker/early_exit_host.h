#ifndef SUPERSERVE_WORKER_EARLY_EXIT_HOST_H_
#define SUPERSERVE_WORKER_EARLY_EXIT_HOST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_repository.h"
#include "common/tensor_codec.h"
#include "worker/executor.h"

namespace superserve {

namespace models {
class EarlyExitNet;
}

// One loaded model of the `early_exit` family (models/early_exit.h) on the
// torch executor. A batch runs stage after stage until its slowest member has
// left (Orloj's padding semantics); each query's output is the logits of the
// exit it left at. Batches are not padded to a profiled size: a padding row
// that never became confident would keep the whole batch running.
//
// Per query it reports the exit, the time into the batch at which that exit
// was reached, and the query's own execution time in the profile's units (a
// batch of one running to that exit): measured for a batch of one, and for a
// larger batch the batch-of-one time of its exit measured at load.
// Torch stays in the .cc file. One caller at a time.
class EarlyExitHost {
 public:
  // The network runs on `device` ("cpu" or "cuda[:N]", models/device.h).
  static absl::StatusOr<std::unique_ptr<EarlyExitHost>> Load(const ModelEntry& model,
                                                             const std::string& checkpoint,
                                                             const std::string& device = "cpu");
  ~EarlyExitHost();

  // `exit_threshold`: the batch's (the scheduler's choice, load-adaptive
  // exits), in (0, 1]; 0 = the model's own. Anything else is
  // INVALID_ARGUMENT.
  absl::StatusOr<std::vector<HostTensor>> Run(absl::Span<const v1::Tensor* const> inputs,
                                              std::vector<QueryExit>* exits,
                                              float exit_threshold = 0);

  // One run at every batch size with every exit forced, on the calling
  // thread (Load does it; a GPU worker again on its serving thread, whose
  // per-thread device state a run creates: TorchExecutor::PrepareThread).
  absl::Status WarmUp();

  // Batch-of-one time to reach each exit, measured at load (median).
  const std::vector<Nanos>& exit_times() const { return exit_times_; }
  // Bytes of the network's parameters and buffers.
  int64_t ResidentBytes() const;

 private:
  EarlyExitHost() = default;
  std::unique_ptr<models::EarlyExitNet> net_;
  std::vector<int64_t> input_shape_;
  float input_mean_ = 0.f;
  float input_std_ = 1.f;
  int32_t max_batch_ = 1;
  float own_threshold_ = 0;  // the checkpoint's
  std::vector<Nanos> exit_times_;
};

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_EARLY_EXIT_HOST_H_
