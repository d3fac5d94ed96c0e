// Turns a batch a policy took off a model's queue into the BatchPlan sent to
// its worker and the InflightBatch the pool keeps until the worker answers.
#ifndef SUPERSERVE_SERVING_BATCH_BUILDER_H_
#define SUPERSERVE_SERVING_BATCH_BUILDER_H_

#include <cstdint>

#include "common/time.h"
#include "serving/batch.h"
#include "serving/model_registry.h"
#include "serving/model_scheduler.h"
#include "serving/pending_queries.h"
#include "serving/worker_pool.h"

namespace superserve {

struct BuiltBatch {
  BatchPlan plan;
  InflightBatch inflight;
};

// Batch `batch_id` of model `m`, sent at `now`: the subnet (with its control
// tuple) and exit threshold the policy chose, from the profile; the taken
// queries still pending, in the taken order, each marked on a worker from
// `now`, with its input (shared, not copied). A query answered meanwhile is
// left out; plan.queries empty: nothing to send. The in-flight record names
// the same queries and is waited for until their latest deadline (at least
// `now`) plus `grace`.
BuiltBatch BuildBatch(const ServedModel& m, const TakenBatch& taken, uint64_t batch_id, Nanos now,
                      Nanos grace, PendingQueries* pending);

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_BATCH_BUILDER_H_
