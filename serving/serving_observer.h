// What the core reports as it goes (answers, batches, gauges): the router's
// metrics and the simulator's report count the same events.
#ifndef SUPERSERVE_SERVING_SERVING_OBSERVER_H_
#define SUPERSERVE_SERVING_SERVING_OBSERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/time.h"
#include "policies/query.h"
#include "serving/batch.h"

namespace superserve {

enum class QueryOutcome {
  kOk,                 // answered within its deadline
  kLate,               // answered, but after its deadline (an SLO miss)
  kDeadlineExceeded,   // dropped as infeasible, expired in the queue, or cancelled
  kUnavailable,        // no live worker, model removed, or shutting down
  kResourceExhausted,  // the model's queue was full
  kInvalidArgument,    // unknown model, bad input
  kError,              // a worker failed the batch
};
inline const char* QueryOutcomeName(QueryOutcome o) {
  switch (o) {
    case QueryOutcome::kOk: return "ok";
    case QueryOutcome::kLate: return "late";
    case QueryOutcome::kDeadlineExceeded: return "deadline_exceeded";
    case QueryOutcome::kUnavailable: return "unavailable";
    case QueryOutcome::kResourceExhausted: return "resource_exhausted";
    case QueryOutcome::kInvalidArgument: return "invalid_argument";
    case QueryOutcome::kError: return "error";
  }
  return "unknown";
}

struct QueryDone {
  const std::string* model = nullptr;  // "_unknown" for an unknown model
  QueryId id = 0;                      // 0 = rejected on arrival
  QueryOutcome outcome = QueryOutcome::kOk;
  Nanos now = 0;
  Nanos latency = 0;   // arrival to answer
  double accuracy = 0; // served subnet's accuracy (ok and late), percent
  int32_t subnet_id = -1;
  // The query's application tag (dynamic models' per-application metrics);
  // null when it had none or was rejected on arrival.
  std::shared_ptr<const std::string> application;
};

// What the core did, for metrics, reports and tests. Called outside the
// core's lock, possibly from several threads at once; the default does
// nothing. The router's Prometheus metrics and the simulator's report are
// both observers, so both count the same events.
class ServingObserver {
 public:
  virtual ~ServingObserver() = default;
  virtual void OnQueryDone(const QueryDone& done) {}
  // Before the batch goes to its worker's channel.
  virtual void OnBatchSent(const BatchPlan& batch) {}
  virtual void OnWorkersAlive(int32_t alive) {}
  // Refreshed by Tick, at most once per tick interval.
  virtual void OnQueueDepth(const std::string& model, int64_t depth) {}
  virtual void OnWorkerBusyFraction(const std::string& worker, double fraction) {}
  // With the busy fraction: the worker's batch times over the fleet's
  // median worker's (per-worker estimates; 1 = on the shared estimates,
  // 3 = a straggler three times slower). Always 1 with per_worker_speed off.
  virtual void OnWorkerSlowdown(const std::string& worker, double slowdown) {}
  // A worker refused a batch of `model`: it could not start it before its
  // action window closed. Its queries were re-queued or answered.
  // Placement: `model` became resident on `worker`, `cold_start` after the
  // first query that found it resident nowhere (0 for a replica loaded
  // while another one served).
  virtual void OnModelLoaded(const std::string& model, const std::string& worker,
                             Nanos cold_start) {}
  virtual void OnBatchRefused(const std::string& model, const std::string& worker) {}
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_SERVING_OBSERVER_H_
