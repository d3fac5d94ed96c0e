// ModelScheduler: one model's queue and policy; applies its Decisions
// (model_scheduler.h).
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
  // A dynamic model: its fastest batch is one query of the shortest time
  // any application's histogram holds (c0 + c1 * 1 * l_min).
  for (const auto& a : profile_->dynamic.applications) {
    if (a.bin_edges_us.empty()) continue;
    fastest_ = std::min(fastest_, Micros(profile_->dynamic.batch_overhead_us +
                                         profile_->dynamic.per_request_factor *
                                             a.bin_edges_us.front()));
  }
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

Nanos ModelScheduler::ProbeHorizon() const {
  // Up to the longest budget seen (a policy may need most of it for its
  // best batch), at least 2.5x the peak tuple's estimate.
  return std::max<Nanos>(
      {kProbes, max_budget_, 5 * EstimatedLatency(peak_subnet_, peak_batch_) / 2});
}

ModelScheduler::ProbePoint ModelScheduler::ProbeAt(Nanos slack, Nanos now) {
  // Asks the policy what it would run for a full queue whose head has
  // `slack` left: the throughput of its answer with its own estimates.
  // Read-only for the policy's view: a probe queue, the real clock, one
  // free worker.
  const int32_t n = 2 * peak_batch_;
  probe_free_.assign(1, workers_.front());
  const int32_t live = static_cast<int32_t>(workers_.size());
  probe_queue_.Clear();
  for (int32_t i = 0; i < n; ++i) {
    probe_queue_.Push({std::numeric_limits<QueryId>::max() - static_cast<QueryId>(i), 0, now,
                       now + slack});
  }
  const Decision d = policy_->Decide(
      SchedulingContext{probe_queue_, now, probe_free_, live, /*assume_overload=*/true});
  ProbePoint p;
  p.slack = slack;
  if (d.kind == Decision::Kind::kDispatch && d.drop == 0 && d.take >= 1 &&
      d.subnet_index >= 0 && d.subnet_index < static_cast<int32_t>(profile_->subnets.size()) &&
      profile_->BatchIndex(d.batch_size) >= 0) {
    const Nanos e = std::max<Nanos>(1, EstimatedLatency(d.subnet_index, d.batch_size));
    p.qps = d.take / ToSeconds(e);
    p.take = d.take;
    p.latency = e;
  }
  return p;
}

void ModelScheduler::Probe(Nanos now) {
  probes_.clear();
  next_probes_.clear();
  probed_at_ = now;
  const Nanos horizon = ProbeHorizon();
  for (int k = 1; k <= kProbes; ++k) probes_.push_back(ProbeAt(horizon / kProbes * k, now));
  plan_budget_ = -1;
}

void ModelScheduler::ProbeStep(Nanos now) {
  if (next_probes_.empty()) {
    next_horizon_ = ProbeHorizon();
    refresh_started_ = now;
  }
  for (int i = 0; i < kProbesPerStep && static_cast<int>(next_probes_.size()) < kProbes; ++i) {
    const int k = static_cast<int>(next_probes_.size()) + 1;
    next_probes_.push_back(ProbeAt(next_horizon_ / kProbes * k, now));
  }
  if (static_cast<int>(next_probes_.size()) < kProbes) return;
  probes_.swap(next_probes_);
  next_probes_.clear();
  probed_at_ = refresh_started_;
  plan_budget_ = -1;
}

const ModelScheduler::Plan& ModelScheduler::PlanFor(Nanos budget, Nanos now) {
  if (probes_.empty() || now < probed_at_) {
    Probe(now);
  } else if (now - probed_at_ >= kProbeInterval) {
    ProbeStep(now);
  }
  if (budget == plan_budget_) return plan_;
  plan_budget_ = budget;
  plan_ = Plan();
  double best = 0;
  for (const ProbePoint& p : probes_) {
    if (p.slack <= budget) best = std::max(best, p.qps);
  }
  if (best <= 0) return plan_;
  for (const ProbePoint& p : probes_) {
    if (p.slack <= budget && p.qps >= kNearPeak * best) {
      plan_.target = p.slack;
      plan_.qps = p.qps * static_cast<double>(workers_.size());
      plan_.take = p.take;
      plan_.latency = p.latency;
      break;
    }
  }
  return plan_;
}

int64_t ModelScheduler::AdmissibleAhead(const Plan& plan, Nanos deadline, Nanos now,
                                        double headroom) {
  // Queries ahead drain at the plan's throughput (times the headroom); the
  // query must reach the head with the plan's slack left.
  const double wait = ToSeconds(deadline - now - plan.target);
  if (wait < 0) return 0;
  return 1 + static_cast<int64_t>(std::min(wait * plan.qps * headroom, 1e15));
}

bool ModelScheduler::Admit(Nanos deadline, Nanos now) {
  // Dynamic models have no tuple table to plan with: no shedding.
  if (profile_->subnets.empty()) return true;
  // A queue that one round of peak batches empties is no backlog (and the
  // plan, which asks the policy, is not needed).
  if (!overload_.shed || workers_.empty() ||
      queue_.size() < workers_.size() * static_cast<size_t>(peak_batch_)) {
    return true;
  }
  const Plan& plan = PlanFor(deadline - now, now);
  if (plan.target < 0) return true;
  const int64_t most = AdmissibleAhead(plan, deadline, now, overload_.admit_headroom);
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
  if (!overload_.shed || workers_.empty() || profile_->subnets.empty()) return;
  while (queue_.size() > static_cast<size_t>(peak_batch_)) {
    const Query& head = queue_.Head();
    const Plan plan = PlanFor(head.deadline - head.arrival, now);  // a copy: PlanFor reuses
    if (plan.target < 0 || head.deadline - now >= plan.target) return;
    // Only while the model is losing queries anyway (one was dropped as
    // infeasible, expired or shed within the head's budget: no shedding in
    // a burst the policy rides out), with the plan's batch waiting behind
    // the head (Clockwork: a batch size is too small when there are enough
    // requests for a larger one), and backlogged: at the plan's rate, the
    // queue plus one more batch would not drain before the last deadline
    // (what serving the head in a small batch costs). Otherwise the policy
    // serves the head.
    if (last_loss_ < 0 || now - last_loss_ > head.deadline - head.arrival) return;
    const int64_t behind = static_cast<int64_t>(queue_.size()) - 1;
    if (behind < plan.take) return;
    const Plan tail = PlanFor(max_deadline_budget_, now);
    if (tail.target >= 0) {
      const double drain = ToSeconds(max_deadline_ - now - tail.latency);
      const int64_t room =
          drain < 0 ? 0 : 1 + static_cast<int64_t>(std::min(drain * tail.qps, 1e15));
      if (behind + plan.take < room) return;
    }
    const QueryId id = queue_.Pop().id;
    (cancelled_.erase(id) ? r->cancelled : r->shed).push_back(id);
    last_loss_ = now;
  }
}

void ModelScheduler::AddWorker(int32_t worker) {
  auto it = std::lower_bound(workers_.begin(), workers_.end(), worker);
  if (it == workers_.end() || *it != worker) workers_.insert(it, worker);
  probes_.clear();  // the plan's throughput counts the workers
  next_probes_.clear();
}

void ModelScheduler::RemoveWorker(int32_t worker) {
  auto it = std::lower_bound(workers_.begin(), workers_.end(), worker);
  if (it != workers_.end() && *it == worker) workers_.erase(it);
  probes_.clear();
  next_probes_.clear();
}

void ModelScheduler::Push(const Query& q, Nanos now) {
  NoteDeadline(q);
  queue_.Push(q);
  policy_->OnArrival(q, now);
}

void ScheduleResult::Clear() {
  dropped.clear();
  shed.clear();
  cancelled.clear();
  batches.clear();
  invalid.clear();
}

ScheduleResult ModelScheduler::Schedule(Nanos now, std::vector<FreeSlot>* slots,
                                        int32_t live_workers, double worker_speed) {
  ScheduleResult r;
  Schedule(now, slots, live_workers, worker_speed, &r);
  return r;
}

void ModelScheduler::Schedule(Nanos now, std::vector<FreeSlot>* slots, int32_t live_workers,
                              double worker_speed, ScheduleResult* out) {
  out->Clear();
  ScheduleResult& r = *out;
  // The wake-up reflects the policy's latest answer: one that dispatched,
  // or stopped for want of slots, has none pending.
  if (!queue_.empty() && !slots->empty()) wake_at_ = 0;
  // Each round drops, dispatches or stops; the bound guards against a policy
  // that keeps returning decisions that make no progress.
  for (int round = 0; round < 4096 && !queue_.empty() && !slots->empty(); ++round) {
    ShedHeads(now, &r);
    if (queue_.empty()) break;
    free_ids_.clear();
    for (const FreeSlot& s : *slots) free_ids_.push_back(s.worker);
    SchedulingContext ctx{queue_, now, free_ids_, live_workers};
    ctx.worker_speed = worker_speed;
    Decision d = policy_->Decide(ctx);
    if (d.drop < 0 || d.drop > static_cast<int32_t>(queue_.size())) {
      r.invalid = absl::StrCat("policy ", std::string(policy_->name()), " dropped ", d.drop, " of ",
                               queue_.size(), " queued queries");
      return;
    }
    if (d.drop > 0) last_loss_ = now;
    for (int32_t i = 0; i < d.drop; ++i) {
      const QueryId id = queue_.Pop().id;
      // A cancelled query is answered as cancelled, not as infeasible.
      (cancelled_.erase(id) ? r.cancelled : r.dropped).push_back(id);
    }
    if (d.kind == Decision::Kind::kWakeAt) {
      wake_at_ = d.wake_at;
      return;
    }
    if (d.kind != Decision::Kind::kDispatch) {
      if (d.drop > 0) continue;  // ask again about what is left
      return;
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
    // An exit threshold only for a dynamic model whose profile lists it.
    const bool threshold_ok =
        d.exit_threshold_index == -1 ||
        (d.exit_threshold_index >= 0 &&
         d.exit_threshold_index < static_cast<int32_t>(profile_->dynamic.thresholds.size()));
    if (slot == slots->end() || d.take < 1 || d.take > d.batch_size || !subnet_ok || !threshold_ok ||
        profile_->BatchIndex(d.batch_size) < 0) {
      r.invalid = absl::StrCat("policy ", std::string(policy_->name()), " returned an invalid dispatch (worker ",
                               d.worker, ", take ", d.take, ", batch ", d.batch_size,
                               ", subnet index ", d.subnet_index, ", exit threshold index ",
                               d.exit_threshold_index, ")");
      return;
    }
    TakenBatch b;
    b.worker = d.worker;
    b.subnet_index = d.subnet_index;
    b.exit_threshold_index = d.exit_threshold_index;
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
    if (d.take_ids.empty()) {
      b.queries.reserve(static_cast<size_t>(std::min<int64_t>(d.take, queue_.size())));
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
    // The action window's end, for every policy: the first deadline (EDF
    // order) minus the estimated latency of the chosen tuple. A decision
    // its own estimate already calls late gets `now`: start at once or not
    // at all.
    const Nanos last_start =
        b.queries.front().deadline -
        static_cast<Nanos>(worker_speed *
                           static_cast<double>(EstimatedLatency(d.subnet_index, d.batch_size)));
    b.latest = std::max(now, d.latest > 0 ? std::min(d.latest, last_start) : last_start);
    if (--slot->slots <= 0) slots->erase(slot);
    r.batches.push_back(std::move(b));
  }
}

ModelScheduler::Requeue ModelScheduler::TryRequeue(const Query& q, Nanos now, Nanos load_ready) {
  if (q.deadline - now < fastest_) return Requeue::kTooLate;
  if (workers_.empty()) {
    if (load_ready < 0) return Requeue::kNoWorker;
    if (q.deadline - std::max(now, load_ready) < fastest_) return Requeue::kTooLate;
  }
  NoteDeadline(q);
  queue_.Push(q);
  policy_->OnRequeue(q, now);
  return Requeue::kQueued;
}

void ModelScheduler::DropDueBefore(Nanos by, Nanos now, std::vector<QueryId>* dropped) {
  while (!queue_.empty() && queue_.Head().deadline < by) {
    last_loss_ = now;
    const QueryId id = queue_.Pop().id;
    cancelled_.erase(id);
    dropped->push_back(id);
  }
}

void ModelScheduler::Sweep(Nanos now, std::vector<QueryId>* expired,
                           std::vector<QueryId>* cancelled) {
  while (!queue_.empty() && queue_.Head().deadline <= now) {
    last_loss_ = now;
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
