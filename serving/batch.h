// What travels between the core and a worker: a batch sent (BatchPlan) and
// what came back (BatchOutcome).
#ifndef SUPERSERVE_SERVING_BATCH_H_
#define SUPERSERVE_SERVING_BATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/control_tuple.h"
#include "common/time.h"
#include "policies/decision.h"
#include "policies/query.h"
#include "serving/query_handle.h"

namespace superserve {

// One batch on its way to a worker: what the policy decided, with the
// queries' input payloads (shared, not copied).
struct BatchPlan {
  uint64_t batch_id = 0;
  int32_t worker = -1;
  std::string model;
  int32_t subnet_index = -1;  // index into the model's profile
  int32_t subnet_id = -1;
  ControlTuple control;
  // Dynamic models: the exit confidence threshold the batch runs at, an
  // index into the profile's dynamic.thresholds and its value; -1 and 0 =
  // the model's own default.
  int32_t exit_threshold_index = -1;
  double exit_threshold = 0;
  int32_t batch_size = 0;  // the profiled batch size the policy planned for
  Nanos sent_at = 0;       // core clock
  Nanos earliest = 0;      // core clock; 0 = now
  Nanos latest = 0;        // core clock; 0 = no bound
  std::vector<QueryId> queries;
  std::vector<std::shared_ptr<QueryPayload>> inputs;  // parallel to queries
};

// What a worker reports for one batch.
struct BatchOutcome {
  uint64_t batch_id = 0;
  // Not OK: the worker failed the whole batch. DEADLINE_EXCEEDED means it
  // could not start the batch within [earliest, latest]: the queries are
  // re-queued, not failed.
  absl::Status status;
  Nanos exec = 0;          // execution time measured on the worker
  Nanos worker_queue = 0;  // time the batch waited on the worker
  // (query id, output). Ids are checked against the batch: a missing,
  // duplicated or foreign id never reaches another query.
  std::vector<std::pair<QueryId, std::shared_ptr<QueryPayload>>> outputs;
  // Dynamic models: per-query execution time and exit (the application is
  // filled in by the core); handed to the policy as telemetry.
  std::vector<QueryTelemetry> query_times;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_BATCH_H_
