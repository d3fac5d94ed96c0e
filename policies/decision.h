#ifndef SUPERSERVE_POLICIES_DECISION_H_
#define SUPERSERVE_POLICIES_DECISION_H_

#include <cstdint>
#include <vector>

#include "common/time.h"
#include "policies/query.h"

namespace superserve {

// A policy's answer to "what next?". The executor of the decision (router or
// simulator) applies it to the EDF queue in this order:
//   1. pop `drop` queries from the head and answer them DEADLINE_EXCEEDED
//      (infeasible: no tuple can meet their deadline);
//   2. if kind == kDispatch, pop `take` queries (1 <= take <= batch_size) and
//      run them on `worker` as one batch of the profile's `batch_size` with
//      subnet `subnet_index`, starting within [earliest, latest]. When
//      `take_ids` is non-empty the batch is exactly those queries wherever
//      they sit in the queue (policies that do not serve in EDF order, e.g.
//      Orloj), take == take_ids.size(); ids no longer queued are skipped.
//      A dynamic model (no subnets) is dispatched with subnet_index -1;
//   3. if kind == kWakeAt, ask again at `wake_at` at the latest (or sooner, on
//      an arrival or a completion).
struct Decision {
  enum class Kind { kIdle, kDispatch, kWakeAt };
  Kind kind = Kind::kIdle;
  int32_t drop = 0;
  int32_t take = 0;
  int32_t batch_size = 0;     // a profiled batch size >= take
  int32_t subnet_index = -1;  // index into ModelProfile::subnets
  int32_t worker = -1;        // one of the free workers offered
  Nanos earliest = 0;         // router clock; 0 = now
  Nanos latest = 0;           // router clock; 0 = no bound
  Nanos wake_at = 0;
  std::vector<QueryId> take_ids;  // empty: the `take` most urgent queries
  // Dynamic models with load-adaptive exits: the exit confidence threshold
  // the batch runs at, an index into ModelProfile::dynamic.thresholds; -1 =
  // the model's default.
  int32_t exit_threshold_index = -1;

  static Decision Idle(int32_t drop = 0) {
    Decision d;
    d.drop = drop;
    return d;
  }
  static Decision WakeAt(Nanos t, int32_t drop = 0) {
    Decision d;
    d.kind = Kind::kWakeAt;
    d.wake_at = t;
    d.drop = drop;
    return d;
  }
};

// One query of a completed batch of a dynamic model: its own execution time
// (alone, as the worker measured or attributed it) and the exit it took.
struct QueryTelemetry {
  QueryId id = 0;
  int32_t application = 0;  // Query::application
  Nanos exec = 0;
  int32_t exit = -1;  // early-exit index, -1 = not reported
};

// What a worker reports after a batch; policies use it to correct latency
// estimates online.
struct CompletionTelemetry {
  int32_t worker = -1;
  int32_t subnet_index = -1;
  int32_t batch_size = 0;
  Nanos exec = 0;      // measured execution time on the worker
  Nanos overhead = 0;  // dispatch round trip minus exec (RPC + transfer)
  Nanos now = 0;
  // Dynamic models: the batch's Decision::exit_threshold_index.
  int32_t exit_threshold_index = -1;
  // Dynamic models: one entry per query the worker reported on (may be
  // empty; static models leave it empty).
  std::vector<QueryTelemetry> queries;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_DECISION_H_
