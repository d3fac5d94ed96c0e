#include "serving/model_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace superserve {

ModelScheduler::ModelScheduler(const ModelProfile* profile, std::unique_ptr<Policy> policy)
    : profile_(profile), policy_(std::move(policy)) {
  fastest_ = std::numeric_limits<Nanos>::max();
  for (const auto& s : profile_->subnets) fastest_ = std::min(fastest_, s.latency.front());
  // The peak tuple: the most queries per profiled second among the subnets
  // the policy may run (all of them if it claims none), ties to the shorter
  // latency. Which tuple it is stays fixed; its latency is the policy's
  // online estimate at each use.
  const int32_t n = static_cast<int32_t>(profile_->subnets.size());
  bool any = false;
  for (int32_t i = 0; i < n; ++i) any = any || policy_->MayRun(i);
  double best = -1;
  Nanos best_latency = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (any && !policy_->MayRun(i)) continue;
    const SubnetProfile& s = profile_->subnets[i];
    for (size_t bi = 0; bi < profile_->batch_sizes.size() && bi < s.latency.size(); ++bi) {
      const Nanos l = std::max<Nanos>(1, s.latency[bi]);
      const double qps = profile_->batch_sizes[bi] / static_cast<double>(l);
      if (qps > best * (1 + 1e-12) || (qps >= best * (1 - 1e-12) && l < best_latency)) {
        best = qps;
        best_latency = l;
        peak_subnet_ = i;
        peak_batch_ = profile_->batch_sizes[bi];
      }
    }
  }
}

Nanos ModelScheduler::EstimatedLatency(int32_t subnet_index, int32_t batch_size) const {
  const Nanos e = policy_->EstimatedLatency(subnet_index, batch_size);
  if (e >= 0) return e;
  const int bi = profile_->BatchIndex(batch_size);
  if (subnet_index < 0 || subnet_index >= static_cast<int32_t>(profile_->subnets.size()) ||
      bi < 0) {
    return fastest_;
  }
  return profile_->subnets[subnet_index].latency[bi];
}

int64_t ModelScheduler::AdmissibleAhead(Nanos deadline, Nanos now) const {
  // A query with k queries ahead is served, at the earliest, in round
  // floor(k / (W b)) + 1 of batches of b on the W workers, each round taking
  // the peak subnet's estimate at b; it must reach its round with the head
  // margin to spare. The most queries ahead any batch size allows.
  const int64_t w = static_cast<int64_t>(workers_.size());
  const double left = static_cast<double>(deadline - now);
  int64_t most = 0;
  for (int32_t b : profile_->batch_sizes) {
    const Nanos c = std::max<Nanos>(1, EstimatedLatency(peak_subnet_, b));
    const double rounds = left / static_cast<double>(c) - 1 - overload_.head_margin;
    if (rounds < 0) continue;
    const double k = (std::floor(rounds) + 1) * static_cast<double>(w * b);
    most = std::max(most, static_cast<int64_t>(std::min(k, 1e15)));
  }
  return most;
}

bool ModelScheduler::Admit(Nanos deadline, Nanos now) const {
  if (!overload_.shed || workers_.empty() || queue_.empty()) return true;
  const int64_t most = AdmissibleAhead(deadline, now);
  if (static_cast<int64_t>(queue_.size()) < most) return true;
  if (most <= 0) return false;
  Nanos next = 0;
  // Only the queries due no later than this one are ahead of it (EDF, ties
  // in arrival order); counting stops at `most`, so an admission costs
  // O(most) at worst.
  return static_cast<int64_t>(queue_.CountDeadlinesBefore(deadline + 1, &next,
                                                          static_cast<size_t>(most))) < most;
}

void ModelScheduler::ShedHeads(Nanos now, ScheduleResult* r) {
  if (!overload_.shed || workers_.empty()) return;
  const Nanos head_slack = static_cast<Nanos>(
      static_cast<double>(EstimatedLatency(peak_subnet_, peak_batch_)) *
      (1 + overload_.head_margin));
  while (!queue_.empty() && queue_.Head().deadline - now < head_slack) {
    // Only with a full peak batch behind the head (Clockwork: a batch size
    // is too small when there are enough requests for a larger one), and
    // only when backlogged: the last query would not be admitted behind
    // everything queued plus one more peak batch (what serving the head in
    // a small batch costs). Otherwise the policy serves the head.
    const int64_t behind = static_cast<int64_t>(queue_.size()) - 1;
    if (behind < peak_batch_ || behind + peak_batch_ < AdmissibleAhead(max_deadline_, now)) {
      return;
    }
    const QueryId id = queue_.Pop().id;
    (cancelled_.erase(id) ? r->cancelled : r->shed).push_back(id);
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
  max_deadline_ = queue_.empty() ? q.deadline : std::max(max_deadline_, q.deadline);
  queue_.Push(q);
  policy_->OnArrival(q, now);
}

ScheduleResult ModelScheduler::Schedule(Nanos now, std::vector<FreeSlot>* slots,
                                        int32_t live_workers) {
  ScheduleResult r;
  // Each round drops, dispatches or stops; the bound guards against a policy
  // that keeps returning decisions that make no progress.
  for (int round = 0; round < 4096 && !queue_.empty() && !slots->empty(); ++round) {
    ShedHeads(now, &r);
    if (queue_.empty()) break;
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
    if (slot == slots->end() || d.take < 1 || d.take > d.batch_size || d.subnet_index < 0 ||
        d.subnet_index >= static_cast<int32_t>(profile_->subnets.size()) ||
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
    for (int32_t i = 0; i < d.take && !queue_.empty(); ++i) {
      Query q = queue_.Pop();
      if (!cancelled_.empty() && cancelled_.erase(q.id)) {
        r.cancelled.push_back(q.id);
        continue;
      }
      b.queries.push_back(q);
    }
    if (b.queries.empty()) continue;  // all cancelled: the worker is still free
    // The action window's end, for every policy: the first deadline (EDF
    // order) minus the estimated latency of the chosen tuple. A decision
    // its own estimate already calls late gets `now`: start at once or not
    // at all.
    const Nanos last_start = b.queries.front().deadline - EstimatedLatency(d.subnet_index, d.batch_size);
    b.latest = std::max(now, d.latest > 0 ? std::min(d.latest, last_start) : last_start);
    if (--slot->slots <= 0) slots->erase(slot);
    r.batches.push_back(std::move(b));
  }
  return r;
}

ModelScheduler::Requeue ModelScheduler::TryRequeue(const Query& q, Nanos now) {
  if (q.deadline - now < fastest_) return Requeue::kTooLate;
  if (workers_.empty()) return Requeue::kNoWorker;
  max_deadline_ = queue_.empty() ? q.deadline : std::max(max_deadline_, q.deadline);
  queue_.Push(q);
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
