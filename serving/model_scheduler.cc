#include "serving/model_scheduler.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace superserve {

ModelScheduler::ModelScheduler(const ModelProfile* profile, std::unique_ptr<Policy> policy)
    : profile_(profile), policy_(std::move(policy)) {
  fastest_ = std::numeric_limits<Nanos>::max();
  for (const auto& s : profile_->subnets) fastest_ = std::min(fastest_, s.latency.front());
  // A dynamic model: its fastest batch is one query of the shortest time
  // any application's histogram holds (c0 + c1 * 1 * l_min).
  for (const auto& a : profile_->dynamic.applications) {
    if (a.bin_edges_us.empty()) continue;
    fastest_ = std::min(fastest_, Micros(profile_->dynamic.batch_overhead_us +
                                         profile_->dynamic.per_request_factor *
                                             a.bin_edges_us.front()));
  }
}

void ModelScheduler::AddWorker(int32_t worker) {
  auto it = std::lower_bound(workers_.begin(), workers_.end(), worker);
  if (it == workers_.end() || *it != worker) workers_.insert(it, worker);
}

void ModelScheduler::RemoveWorker(int32_t worker) {
  auto it = std::lower_bound(workers_.begin(), workers_.end(), worker);
  if (it != workers_.end() && *it == worker) workers_.erase(it);
}

void ModelScheduler::Push(const Query& q, Nanos now) {
  queue_.Push(q);
  policy_->OnArrival(q, now);
}

ScheduleResult ModelScheduler::Schedule(Nanos now, std::vector<FreeSlot>* slots,
                                        int32_t live_workers) {
  ScheduleResult r;
  // The wake-up reflects the policy's latest answer: one that dispatched,
  // or stopped for want of slots, has none pending.
  if (!queue_.empty() && !slots->empty()) wake_at_ = 0;
  // Each round drops, dispatches or stops; the bound guards against a policy
  // that keeps returning decisions that make no progress.
  for (int round = 0; round < 4096 && !queue_.empty() && !slots->empty(); ++round) {
    free_ids_.clear();
    for (const FreeSlot& s : *slots) free_ids_.push_back(s.worker);
    Decision d = policy_->Decide(SchedulingContext{queue_, now, free_ids_, live_workers});
    if (d.drop < 0 || d.drop > static_cast<int32_t>(queue_.size())) {
      r.invalid = absl::StrCat("policy ", std::string(policy_->name()), " dropped ", d.drop, " of ",
                               queue_.size(), " queued queries");
      return r;
    }
    for (int32_t i = 0; i < d.drop; ++i) {
      const QueryId id = queue_.Pop().id;
      // A cancelled query is answered as cancelled, not as infeasible.
      (cancelled_.erase(id) ? r.cancelled : r.dropped).push_back(id);
    }
    if (d.kind == Decision::Kind::kWakeAt) {
      wake_at_ = d.wake_at;
      return r;
    }
    if (d.kind != Decision::Kind::kDispatch) {
      if (d.drop > 0) continue;  // ask again about what is left
      return r;
    }
    auto slot = std::find_if(slots->begin(), slots->end(),
                             [&](const FreeSlot& s) { return s.worker == d.worker; });
    if (!d.take_ids.empty()) d.take = static_cast<int32_t>(d.take_ids.size());
    // A dynamic model has no subnets: it is dispatched with subnet -1.
    const bool subnet_ok =
        profile_->subnets.empty()
            ? d.subnet_index == -1
            : d.subnet_index >= 0 &&
                  d.subnet_index < static_cast<int32_t>(profile_->subnets.size());
    if (slot == slots->end() || d.take < 1 || d.take > d.batch_size || !subnet_ok ||
        profile_->BatchIndex(d.batch_size) < 0) {
      r.invalid = absl::StrCat("policy ", std::string(policy_->name()), " returned an invalid dispatch (worker ",
                               d.worker, ", take ", d.take, ", batch ", d.batch_size,
                               ", subnet index ", d.subnet_index, ")");
      return r;
    }
    TakenBatch b;
    b.worker = d.worker;
    b.subnet_index = d.subnet_index;
    b.batch_size = d.batch_size;
    b.earliest = d.earliest;
    b.latest = d.latest;
    if (!d.take_ids.empty()) {
      queue_.TakeIds(d.take_ids, &b.queries);
      if (!cancelled_.empty()) {
        b.queries.erase(std::remove_if(b.queries.begin(), b.queries.end(),
                                       [&](const Query& q) {
                                         if (!cancelled_.erase(q.id)) return false;
                                         r.cancelled.push_back(q.id);
                                         return true;
                                       }),
                        b.queries.end());
      }
    }
    for (int32_t i = 0; d.take_ids.empty() && i < d.take && !queue_.empty(); ++i) {
      Query q = queue_.Pop();
      if (!cancelled_.empty() && cancelled_.erase(q.id)) {
        r.cancelled.push_back(q.id);
        continue;
      }
      b.queries.push_back(q);
    }
    if (b.queries.empty()) continue;  // all cancelled: the worker is still free
    if (--slot->slots <= 0) slots->erase(slot);
    r.batches.push_back(std::move(b));
  }
  return r;
}

ModelScheduler::Requeue ModelScheduler::TryRequeue(const Query& q, Nanos now) {
  if (q.deadline - now < fastest_) return Requeue::kTooLate;
  if (workers_.empty()) return Requeue::kNoWorker;
  queue_.Push(q);
  policy_->OnRequeue(q, now);
  return Requeue::kQueued;
}

void ModelScheduler::Sweep(Nanos now, std::vector<QueryId>* expired,
                           std::vector<QueryId>* cancelled) {
  while (!queue_.empty() && queue_.Head().deadline <= now) {
    const QueryId id = queue_.Pop().id;
    (cancelled_.erase(id) ? cancelled : expired)->push_back(id);
  }
  if (cancelled_.empty()) return;
  queue_.RemoveIf([&](const Query& q) {
    if (cancelled_.erase(q.id) == 0) return false;
    cancelled->push_back(q.id);
    return true;
  });
  cancelled_.clear();  // every id in it was in the queue
}

std::vector<QueryId> ModelScheduler::TakeAll() {
  std::vector<Query> all;
  queue_.PopFront(queue_.size(), &all);
  cancelled_.clear();
  std::vector<QueryId> ids;
  ids.reserve(all.size());
  for (const Query& q : all) ids.push_back(q.id);
  return ids;
}

}  // namespace superserve
