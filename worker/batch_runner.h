#ifndef SUPERSERVE_WORKER_BATCH_RUNNER_H_
#define SUPERSERVE_WORKER_BATCH_RUNNER_H_

#include "absl/types/span.h"
#include "common/model_repository.h"
#include "common/time.h"
#include "superserve/v1/worker.pb.h"
#include "worker/executor.h"

namespace superserve {

// Runs one Batch from the router on `executor` (SuperServe Fig. 7 step 5)
// and fills `result` with per-query outputs, in order, and the measured
// queueing and execution times. `received` is when the batch arrived (on
// RealClock); the batch's [earliest_us, latest_us] window is relative to it.
// `models` are the models the worker loaded.
//
// Never lets an exception out, so that the worker keeps serving: a bad batch
// (unknown model, bad input, closed window), an executor error, and any
// exception the executor throws (INTERNAL, naming what() or "unknown
// exception") all become an error result (error + error_code, no outputs).
void RunBatch(const v1::Batch& batch, Nanos received, absl::Span<const ModelEntry> models,
              Executor* executor, v1::BatchResult* result);

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_BATCH_RUNNER_H_
