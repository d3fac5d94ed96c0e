#ifndef SUPERSERVE_WORKER_EXECUTOR_H_
#define SUPERSERVE_WORKER_EXECUTOR_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/control_tuple.h"
#include "common/model_repository.h"
#include "common/tensor_codec.h"
#include "common/time.h"

namespace superserve {

namespace v1 {
class Tensor;
}

// Runs batches of one supernet with a chosen subnet actuated (SuperServe
// Fig. 7 steps 4-5). Implementations: TorchExecutor (the real supernet) and
// EmulatedExecutor (sleeps the profiled latency; for scale benchmarks). The
// worker calls Load once per model, then Run; Load, Run and Unload all come
// from one thread at a time (the worker's executor thread once it serves).
// Where one query of a dynamic model's batch left (early exit).
struct QueryExit {
  int32_t exit = -1;  // 0-based exit index; -1 = not known (emulated)
  Nanos at = 0;       // batch start to the moment its exit was reached
  Nanos own = 0;      // its own execution time, in the profile's units
};

class Executor {
 public:
  virtual ~Executor() = default;
  // "torch" or "emulated"; the worker reports it when registering.
  virtual std::string_view kind() const = 0;
  virtual absl::Status Load(const ModelEntry& model) = 0;
  // Called on the thread that will run batches, before its first one: an
  // executor whose device keeps per-thread state creates it here, not inside
  // a served batch. The default does nothing.
  virtual void PrepareThread() {}
  // Frees a loaded model (an unregistered one); NOT_FOUND if not loaded.
  virtual absl::Status Unload(const std::string& model) = 0;
  // The loaded model's footprint in bytes, measured at Load (placement,
  // docs/engine.md): the torch executor's parameters and buffers, the
  // emulated executor's profile memory_bytes. 0 = not loaded or not known.
  virtual int64_t ResidentBytes(const std::string& model) { return 0; }
  // `inputs` are wire tensors already checked against the model's
  // input_shape (float32). Returns one output per input, in order.
  virtual absl::StatusOr<std::vector<HostTensor>> Run(const std::string& model,
                                                      const ControlTuple& control,
                                                      absl::Span<const v1::Tensor* const> inputs) = 0;

  // Run, for dynamic models also reporting where each query left: `exits`
  // gets one entry per input (parallel to the outputs), or stays empty for a
  // static model. `applications` (parallel to inputs) are the queries'
  // application tags. The default runs Run and reports nothing.
  virtual absl::StatusOr<std::vector<HostTensor>> RunWithExits(
      const std::string& model, const ControlTuple& control,
      absl::Span<const v1::Tensor* const> inputs, absl::Span<const std::string* const> applications,
      std::vector<QueryExit>* exits) {
    exits->clear();
    return Run(model, control, inputs);
  }
};

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_EXECUTOR_H_
