// What a model's policy learns from a batch that ran (CompletionTelemetry):
// its execution time as a fleet-speed worker would have taken it, the
// dispatch overhead, and each reported query's application.
#ifndef SUPERSERVE_SERVING_COMPLETION_TELEMETRY_H_
#define SUPERSERVE_SERVING_COMPLETION_TELEMETRY_H_

#include <cstdint>

#include "common/time.h"
#include "policies/decision.h"
#include "serving/batch.h"
#include "serving/pending_queries.h"
#include "serving/worker_pool.h"

namespace superserve {

// The telemetry of batch `b`, answered by `outcome` on `worker` at `now`, a
// worker running at `speed` relative to the fleet (1: as the fleet, or
// per-worker speed off): exec divided by `speed`, so that the policy's
// shared estimates see the fleet's time (docs/faults.md, slow worker); the
// overhead is the round trip less exec and the worker's queueing, at least
// 0. Takes the outcome's per-query times, each given its query's
// application (-1: the query is no longer pending).
CompletionTelemetry MakeCompletionTelemetry(int32_t worker, const InflightBatch& b,
                                            BatchOutcome* outcome, double speed, Nanos now,
                                            const PendingQueries& pending);

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_COMPLETION_TELEMETRY_H_
