// One model's queue and policy, and the one place a policy's Decision is
// applied (drop, take, wake-up; invalid decisions rejected).
#ifndef SUPERSERVE_SERVING_MODEL_SCHEDULER_H_
#define SUPERSERVE_SERVING_MODEL_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "policies/edf_queue.h"
#include "policies/policy.h"

namespace superserve {

// A free worker and how many more batches it may take now.
struct FreeSlot {
  int32_t worker = -1;
  int32_t slots = 0;
};

// One batch a Decision took off the queue.
struct TakenBatch {
  int32_t worker = -1;
  int32_t subnet_index = -1;
  int32_t batch_size = 0;
  // Dynamic models: Decision::exit_threshold_index (-1 = the default).
  int32_t exit_threshold_index = -1;
  // The action window (Clockwork §4): start no earlier than `earliest` (0 =
  // now) and no later than `latest`, the last start at which the batch's
  // first deadline is still met with the policy's latency estimate (never
  // before the decision's time; tighter if the policy asked for less).
  Nanos earliest = 0;
  Nanos latest = 0;
  std::vector<Query> queries;  // EDF order; cancelled ones already removed
};

// What one scheduling pass decided.
struct ScheduleResult {
  std::vector<QueryId> dropped;    // infeasible: answer DEADLINE_EXCEEDED
  std::vector<QueryId> shed;       // overload shedding: answer DEADLINE_EXCEEDED
  std::vector<QueryId> cancelled;  // the client gave up while queued
  std::vector<TakenBatch> batches;
  std::string invalid;             // non-empty: the policy returned a bad dispatch
  void Clear();  // empties it, keeping the vectors' capacity
};

// How the scheduler keeps goodput at capacity past the peak, whatever the
// policy (docs/engine.md, "Overload").
//
// The plan. Every 250 ms the scheduler asks the policy what it would run for
// a full queue whose head has slack s, for s up to the longest budget
// (deadline - arrival) queued, and rates each answer by its throughput with
// the policy's own latency estimates (Policy::EstimatedLatency). It asks
// with SchedulingContext::assume_overload: a policy that picks its subnet
// from the measured arrival rate (ratefit) answers with what it runs past
// the peak, not its light-load choice. For queries
// of budget T the plan is the least slack `target` <= T at which the answer
// reaches 95 % of the best throughput any slack <= T gives, with that
// throughput (over all W workers) and batch. A slack-driven policy
// (SlackFit) spends extra slack on accuracy and a small one on small
// batches; the plan finds the slack at which it runs at its best rate.
//
//  - Head shedding (Clockwork's scheduler prefers the larger batch "at the
//    expense of dropping an unfortunately timed earlier request"): a head
//    with less than its plan's target left is dropped, instead of being
//    served in a small batch, while (1) the model lost a query within the
//    head's budget (dropped as infeasible, expired or shed: it is losing
//    queries anyway), (2) the plan's batch waits behind the head and (3) the
//    queue is backlogged (at the plan's rate, it plus one more batch would
//    not drain before its last deadline). Serving it is EDF's overload
//    spiral: the small batch costs the throughput the queries behind needed,
//    so they too reach the head nearly expired. Heads are kept at the slack
//    where the policy runs its best batch. Without (1), bursts the policy
//    rides out lost queries to shedding (the paper-shaped bursty cell of
//    `superserve-bench scheduler`: attainment 0.9977 instead of 0.9999).
//  - Admission (Clockwork's controller rejects work it cannot finish): an
//    arrival whose queries ahead would not drain before its deadline minus
//    the plan's target even at admit_headroom x the plan's throughput is
//    answered DEADLINE_EXCEEDED at once. The plan rests on estimates (rolling
//    p99s): a strict bound rejects queries that the head shedding would have
//    served (in the simulator, bounds at 1.6-2.5x lost a policy up to 25 % of
//    its goodput), so admission
//    only answers early what is hopeless; the head shedding holds goodput.
struct OverloadOptions {
  bool shed = true;
  double admit_headroom = 4;
};

// One model's EDF queue and policy, and the one place where a policy's
// Decision is applied and where the re-queue, drop and shedding rules live.
// The router and the simulator both schedule through it. Not thread-safe (the
// ServingCore serialises calls).
class ModelScheduler {
 public:
  ModelScheduler(const ModelProfile* profile, std::unique_ptr<Policy> policy);

  void set_overload(const OverloadOptions& o) { overload_ = o; }
  const OverloadOptions& overload() const { return overload_; }
  // The policy's latency estimate (execution + overhead) of a tuple, or the
  // profiled latency when the policy has none.
  Nanos EstimatedLatency(int32_t subnet_index, int32_t batch_size) const;
  // The policy's peak tuple: the highest profiled throughput among the
  // subnets it may run (Policy::MayRun); it scales the probes.
  int32_t peak_subnet_index() const { return peak_subnet_; }
  int32_t peak_batch_size() const { return peak_batch_; }
  // The overload plan for queries of budget (deadline - arrival) `budget`
  // (OverloadOptions): the head slack `target`, the throughput `qps` (q/s,
  // all workers) and the batch `take` of the policy's answer there.
  // target < 0: the policy runs nothing at any such slack (no shedding).
  // Requires a worker.
  struct Plan {
    Nanos target = -1;
    double qps = 0;
    int32_t take = 0;
    Nanos latency = 0;  // the policy's estimate of that batch
  };
  const Plan& PlanFor(Nanos budget, Nanos now);

  // Admission: false when a query due at `deadline` (not yet queued) cannot
  // finish by then behind the queries ahead of it (OverloadOptions). Always
  // true with shedding off, no worker, or nothing queued.
  bool Admit(Nanos deadline, Nanos now);

  const Policy& policy() const { return *policy_; }
  // Fastest profiled latency of any subnet (batch 1): the re-queue bound.
  Nanos fastest() const { return fastest_; }

  // Queries waiting, not counting cancelled ones awaiting the sweep.
  size_t queued() const { return queue_.size() - cancelled_.size(); }
  bool empty() const { return queue_.empty(); }
  // Deadline of the most urgent query. Requires !empty().
  Nanos head_deadline() const { return queue_.Head().deadline; }
  // The policy's Urgency (when the next batch must start at the latest): the
  // cross-model order for a free worker. Requires !empty().
  Nanos urgency(Nanos now) const { return policy_->Urgency(queue_, now); }

  // Workers serving this model, ascending ids.
  const std::vector<int32_t>& workers() const { return workers_; }
  void AddWorker(int32_t worker);
  void RemoveWorker(int32_t worker);

  // A new query: queued, and the policy told.
  void Push(const Query& q, Nanos now);
  // The client gave up on a queued query: it is answered (not run) when the
  // sweep or a dispatch reaches it.
  void MarkCancelled(QueryId id) { cancelled_.insert(id); }

  // Asks the policy until it idles, waits or no slot is left, applying each
  // Decision in DESIGN.md's order: drop `drop` from the head, then take
  // `take` for `worker`. `slots` is consumed as batches are taken.
  // `live_workers` and `worker_speed` (the slots' workers' speed relative
  // to the fleet: the action window scales with it) are what the policy
  // sees in its SchedulingContext.
  ScheduleResult Schedule(Nanos now, std::vector<FreeSlot>* slots, int32_t live_workers,
                          double worker_speed = 1.0);
  // The same into `r`, cleared first: a caller that schedules on every
  // arrival keeps one, and the vectors' capacity with it.
  void Schedule(Nanos now, std::vector<FreeSlot>* slots, int32_t live_workers, double worker_speed,
                ScheduleResult* r);
  // The wake-up the policy asked for in its latest answer (0 = none);
  // Schedule sets it.
  Nanos wake_at() const { return wake_at_; }
  void clear_wake() { wake_at_ = 0; }

  // The re-queue rule for a query whose batch did not complete (its worker
  // was lost, or could not start it in time): back into the queue while the
  // fastest subnet can still meet its deadline and some worker serves the
  // model; otherwise it is answered.
  enum class Requeue { kQueued, kTooLate, kNoWorker };
  // `load_ready` >= 0: no worker serves the model yet, but a load completes
  // then; the query waits for it if the fastest subnet still meets its
  // deadline after it.
  Requeue TryRequeue(const Query& q, Nanos now, Nanos load_ready = -1);
  // Placement: removes the queued queries due before `by` (a load that
  // completes too late for them), EDF order.
  void DropDueBefore(Nanos by, Nanos now, std::vector<QueryId>* dropped);

  // Removes queries whose deadline has passed (answer DEADLINE_EXCEEDED) and
  // cancelled ones. Expired queries are a prefix of the EDF order: O(k log n)
  // for k expired; cancelled ones cost one O(n) rebuild when there are any.
  void Sweep(Nanos now, std::vector<QueryId>* expired, std::vector<QueryId>* cancelled);
  // Empties the queue (model removed, no worker left, shutdown).
  std::vector<QueryId> TakeAll();

  void OnCompletion(const CompletionTelemetry& t) { policy_->OnCompletion(t); }
  void NameApplication(int32_t id, std::string_view name) {
    policy_->OnApplicationNamed(id, name);
  }

 private:
  const ModelProfile* const profile_;
  std::unique_ptr<Policy> policy_;
  EdfQueue queue_;
  absl::flat_hash_set<QueryId> cancelled_;  // subset of the queue
  std::vector<int32_t> workers_;
  std::vector<int32_t> free_ids_;  // scratch for SchedulingContext
  struct ProbePoint {
    Nanos slack = 0;
    double qps = 0;  // per worker
    int32_t take = 0;
    Nanos latency = 0;
  };
  static constexpr int kProbes = 64;  // slacks evenly up to the probe horizon
  static constexpr Nanos kProbeInterval = 250'000'000;  // 250 ms
  // A refresh of the probes runs this many policy decisions per PlanFor
  // call, the previous complete set answering until it is done: the core's
  // lock is held around each call, and a whole probe of a 100-subnet model
  // with batches to 64 costs ~0.4 ms (about 50 µs a step).
  static constexpr int kProbesPerStep = 8;
  static constexpr double kNearPeak = 0.95;
  Nanos ProbeHorizon() const;
  ProbePoint ProbeAt(Nanos slack, Nanos now);
  // Every probe point at once: the first plan, or after the workers changed.
  void Probe(Nanos now);
  // The next kProbesPerStep points of the refresh under way (one starts
  // kProbeInterval after the previous one started).
  void ProbeStep(Nanos now);
  // The most queries that may be ahead of one due at `deadline` for it to
  // reach the head with plan.target left at headroom x the plan's
  // throughput.
  static int64_t AdmissibleAhead(const Plan& plan, Nanos deadline, Nanos now, double headroom);
  void NoteDeadline(const Query& q) {
    if (queue_.empty() || q.deadline > max_deadline_) {
      max_deadline_ = q.deadline;
      max_deadline_budget_ = q.deadline - q.arrival;
    }
    max_budget_ = std::max(max_budget_, q.deadline - q.arrival);
  }
  // Head shedding before a decision (OverloadOptions).
  void ShedHeads(Nanos now, ScheduleResult* r);

  Nanos fastest_ = 0;
  Nanos wake_at_ = 0;
  OverloadOptions overload_;
  int32_t peak_subnet_ = 0;
  int32_t peak_batch_ = 1;
  // An upper bound on the queue's last deadline (the latest pushed since the
  // queue was last empty) and that query's budget: the backlog test's
  // horizon.
  Nanos max_deadline_ = 0;
  Nanos max_deadline_budget_ = 0;
  Nanos max_budget_ = 0;  // the longest budget queued so far
  std::vector<ProbePoint> probes_;
  Nanos probed_at_ = 0;
  std::vector<ProbePoint> next_probes_;  // the refresh under way
  Nanos next_horizon_ = 0;
  Nanos refresh_started_ = 0;
  EdfQueue probe_queue_;
  std::vector<int32_t> probe_free_;
  Nanos plan_budget_ = -1;  // the budget plan_ is for
  // When a query was last lost: dropped by the policy as infeasible, expired
  // in the queue, or shed. -1 = never.
  Nanos last_loss_ = -1;
  Plan plan_;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_MODEL_SCHEDULER_H_
