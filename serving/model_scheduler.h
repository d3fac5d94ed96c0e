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
  Nanos earliest = 0;
  Nanos latest = 0;
  std::vector<Query> queries;  // EDF order; cancelled ones already removed
};

// What one scheduling pass decided.
struct ScheduleResult {
  std::vector<QueryId> dropped;    // infeasible: answer DEADLINE_EXCEEDED
  std::vector<QueryId> cancelled;  // the client gave up while queued
  std::vector<TakenBatch> batches;
  std::string invalid;             // non-empty: the policy returned a bad dispatch
};

// One model's EDF queue and policy, and the one place where a policy's
// Decision is applied and where the re-queue and drop rules live. The router
// and the simulator both schedule through it. Not thread-safe (the
// ServingCore serialises calls).
class ModelScheduler {
 public:
  ModelScheduler(const ModelProfile* profile, std::unique_ptr<Policy> policy);

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
  // `live_workers` is what the policy sees as SchedulingContext::live_workers.
  ScheduleResult Schedule(Nanos now, std::vector<FreeSlot>* slots, int32_t live_workers);
  // The wake-up the policy asked for in its latest answer (0 = none);
  // Schedule sets it.
  Nanos wake_at() const { return wake_at_; }
  void clear_wake() { wake_at_ = 0; }

  // The re-queue rule for a query whose batch did not complete (its worker
  // was lost, or could not start it in time): back into the queue while the
  // fastest subnet can still meet its deadline and some worker serves the
  // model; otherwise it is answered.
  enum class Requeue { kQueued, kTooLate, kNoWorker };
  Requeue TryRequeue(const Query& q, Nanos now);

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
  Nanos fastest_ = 0;
  Nanos wake_at_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_MODEL_SCHEDULER_H_
