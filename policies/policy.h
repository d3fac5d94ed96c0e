#ifndef SUPERSERVE_POLICIES_POLICY_H_
#define SUPERSERVE_POLICIES_POLICY_H_

#include <string_view>

#include "absl/types/span.h"
#include "common/time.h"
#include "policies/decision.h"
#include "policies/edf_queue.h"
#include "policies/query.h"

namespace superserve {

// What a policy sees when asked: a read-only snapshot.
struct SchedulingContext {
  const EdfQueue& queue;               // pending queries of this model
  Nanos now;                           // router (or simulated) clock
  absl::Span<const int32_t> free_workers;  // ids of workers able to take a batch, ascending
  // Workers alive (free or busy); 0 = unknown. Rate-aware policies use it to
  // turn a tuple's per-worker throughput into the system's capacity.
  int32_t live_workers = 0;
};

// Answers "what next?" for one model. A policy is constructed with the
// model's validated ModelProfile, holds no reference to torch or gRPC, and is
// deterministic: the same sequence of calls gives the same decisions. The same
// object runs inside the live router and inside the simulator. Not
// thread-safe: its owner serialises calls.
class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  // Called when a worker frees up, a query arrives, or a wake-up fires.
  virtual Decision Decide(const SchedulingContext& ctx) = 0;
  // When this model's next batch must start at the latest, for ordering
  // models that compete for a free worker (the serving core offers it to
  // the models with queued queries in ascending order of this). `queue` is
  // non-empty. Default: the head's deadline (EDF across models); a policy
  // that plans its candidate batch (Symphony) answers the candidate's
  // latest start. Must be cheap: once per queued model per pass.
  virtual Nanos Urgency(const EdfQueue& queue, Nanos now) const { return queue.Head().deadline; }
  virtual void OnArrival(const Query& q, Nanos now) {}
  virtual void OnCompletion(const CompletionTelemetry& t) {}
  // A query put back into the queue after its batch did not complete (not a
  // new arrival: rate estimates must not count it twice).
  virtual void OnRequeue(const Query& q, Nanos now) {}
  // The serving core names its application ids (Query::application): once
  // for every id known when the model is added and once for each new one.
  virtual void OnApplicationNamed(int32_t id, std::string_view name) {}
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_POLICY_H_
