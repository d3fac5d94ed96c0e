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
  // True when the serving layer's overload plan asks (serving/model_scheduler.h):
  // answer as if the arrival rate exceeded what any choice can serve. A
  // policy driven by the measured rate (ratefit) then answers with its
  // highest-throughput choice, which is what it runs past the peak; a
  // policy driven by the queue alone can ignore it. Such an answer must not
  // change the policy's state.
  bool assume_overload = false;
  // How many times slower than the policy's latency estimates the offered
  // free workers run (the serving core measures it per worker and offers
  // workers of one speed at a time; 1 = as the fleet). A profile-driven
  // policy sizes its batch for the slack divided by this (ProfiledPolicy),
  // so a straggler gets smaller or faster work, or none, instead of its
  // measurements dragging every worker's estimates.
  double worker_speed = 1.0;
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
  // Called when a worker frees up, a query arrives, or a wake-up fires. The
  // serving layer also asks it about synthetic queues (its overload plan,
  // serving/model_scheduler.h, probes what the policy runs at each head
  // slack every 250 ms): an answer must depend on the context given, not on
  // which queries were asked about before.
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

  // The policy's estimate of the time from dispatching `batch_size` queries
  // (a profiled batch size) as `subnet_index` to their results: execution
  // plus dispatch overhead, with whatever online correction the policy keeps.
  // The serving layer derives every batch's action window from it (the
  // latest start that still meets the batch's first deadline) and sizes its
  // overload shedding with it. < 0: no estimate of its own (the serving
  // layer then uses the profiled latency).
  virtual Nanos EstimatedLatency(int32_t subnet_index, int32_t batch_size) const { return -1; }
  // Whether the policy ever runs `subnet_index`. The overload shedding plans
  // for the highest-throughput tuple among the subnets a policy may run (a
  // fixed-subnet policy's peak is its own subnet's, not the profile's).
  virtual bool MayRun(int32_t subnet_index) const { return true; }
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_POLICY_H_
