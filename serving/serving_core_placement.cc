// ServingCore's placement actions (issue 43; Clockwork's LOAD and UNLOAD):
// what serving/residency.h plans, applied to the models' schedulers, and the
// loads and unloads put into the effects. Kept apart from serving_core.cc.
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "serving/serving_core.h"

namespace superserve {

bool ServingCore::BusyWithLocked(int32_t worker, ModelId model) const {
  const WorkerRecord* w = workers_.Get(worker);
  if (w == nullptr) return false;
  for (const auto& [id, b] : w->inflight) {
    if (b.model == model) return true;
  }
  return false;
}

Nanos ServingCore::StartLoadLocked(ServedModel* m, Nanos now, double max_victim_demand,
                                   Effects* e) {
  const std::vector<int32_t>& on = m->loadable_on;
  const Residency::LoadPlan plan = residency_.Plan(
      m->id, now,
      [&](int32_t w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        // Not one still being told of its registration: no load overtakes it.
        const WorkerRecord* r = workers_.GetAlive(w);
        return r != nullptr && !r->registering && std::binary_search(on.begin(), on.end(), w);
      },
      [&](int32_t w, ModelId victim) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        // Never one with a batch in flight, nor the last holder of a model
        // whose queries wait for it.
        if (BusyWithLocked(w, victim)) return true;
        const ServedModel* v = models_.Find(victim);
        return v != nullptr && !v->scheduler.empty() && v->scheduler.workers().size() <= 1;
      },
      max_victim_demand);
  if (plan.worker < 0) return -1;
  WorkerRecord* w = workers_.GetAlive(plan.worker);
  for (ModelId victim : plan.evict) {
    if (ServedModel* v = models_.Find(victim)) {
      v->scheduler.RemoveWorker(plan.worker);
      e->rare_effects().unloads.emplace_back(w->channel, *v->name);
      ++stats_.unloads;
    }
  }
  residency_.StartLoad(m->id, plan);
  e->rare_effects().loads.emplace_back(w->channel, *m->name, m->profile.load_time);
  ++stats_.loads;
  return std::max<Nanos>(1, plan.ready);
}

void ServingCore::DropUnreachableLocked(ServedModel* m, Nanos ready, Nanos now, Effects* e) {
  std::vector<QueryId> late;
  m->scheduler.DropDueBefore(ready + m->scheduler.fastest(), now, &late);
  stats_.load_too_late += static_cast<int64_t>(late.size());
  for (QueryId id : late) {
    FailLocked(id,
               absl::DeadlineExceededError(absl::StrCat(
                   "model ", *m->name, " is resident on no worker and loading it completes ",
                   ToMillis(ready - now), " ms from now, too late for the deadline")),
               QueryOutcome::kDeadlineExceeded, now, e);
  }
}

Nanos ServingCore::EnsureLoadLocked(ServedModel* m, Nanos now, Effects* e) {
  const Nanos pending = residency_.PendingReady(m->id);
  if (pending >= 0) return pending;
  const Nanos ready = StartLoadLocked(m, now, std::numeric_limits<double>::max(), e);
  if (ready < 0) return -1;
  cold_since_.try_emplace(m->id, now);
  DropUnreachableLocked(m, ready, now, e);
  return ready;
}

Nanos ServingCore::PlaceForArrivalLocked(ServedModel* m, Nanos deadline, Nanos now, Effects* e) {
  if (residency_.empty()) return 0;
  residency_.NoteDemand(m->id, now);
  if (!m->scheduler.workers().empty()) return 0;
  if (m->loadable_on.empty()) return -1;
  const Nanos ready = EnsureLoadLocked(m, now, e);
  if (ready >= 0) return ready;
  if (!CouldHoldLocked(*m)) return -1;
  AwaitRoomLocked(*m);  // no room now: the query waits until a batch or a load ends
  return 0;
}

void ServingCore::AwaitRoomLocked(const ServedModel& m) {
  if (std::find(awaiting_room_.begin(), awaiting_room_.end(), m.id) == awaiting_room_.end()) {
    awaiting_room_.push_back(m.id);
  }
}

bool ServingCore::CouldHoldLocked(const ServedModel& m) const {
  const int64_t bytes = residency_.Footprint(m.id);
  for (int32_t w : m.loadable_on) {
    const WorkerRecord* r = workers_.Get(w);
    if (r != nullptr && r->alive && residency_.budget(w) >= bytes) return true;
  }
  return false;
}

void ServingCore::RetryAwaitingRoomLocked(Nanos now, Effects* e) {
  if (awaiting_room_.empty()) return;
  std::vector<ModelId> waiting;
  waiting.swap(awaiting_room_);
  for (ModelId id : waiting) {
    ServedModel* m = models_.Find(id);
    if (m == nullptr || m->scheduler.empty() || !m->scheduler.workers().empty() ||
        residency_.PendingReady(id) >= 0) {
      continue;  // answered, swept, removed, or served meanwhile
    }
    if (EnsureLoadLocked(m, now, e) >= 0) continue;
    if (CouldHoldLocked(*m)) {
      awaiting_room_.push_back(id);
      continue;
    }
    const absl::Status none =
        absl::UnavailableError(absl::StrCat("no live worker can load model ", *m->name));
    for (QueryId q : m->scheduler.TakeAll()) {
      FailLocked(q, none, QueryOutcome::kUnavailable, now, e);
    }
  }
}

void ServingCore::MaybeReplicateLocked(ServedModel* m, Nanos deadline, Nanos now, Effects* e) {
  if (options_.replicate_queue <= 0 || residency_.empty() || m->scheduler.workers().empty() ||
      residency_.PendingReady(m->id) >= 0) {
    return;
  }
  const int64_t replicas = residency_.Replicas(m->id);
  if (replicas <= 0 || static_cast<int64_t>(m->scheduler.queued()) <=
                           int64_t{options_.replicate_queue} * replicas) {
    return;
  }
  StartLoadLocked(m, now, residency_.Demand(m->id, now), e);
}

void ServingCore::OnModelLoaded(int32_t worker, const std::string& model,
                                const absl::Status& status, int64_t measured_bytes) {
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    const Nanos now = clock_->Now();
    ServedModel* m = models_.Find(model);
    WorkerRecord* w = workers_.GetAlive(worker);
    if (m == nullptr || w == nullptr) return;
    w->last_heard = now;
    if (!status.ok()) {
      if (residency_.StateOf(worker, m->id) != Residency::State::kLoading) return;
      residency_.FailLoad(worker, m->id);
      if (measured_bytes > 0) {
        // A worker that refused the load over its budget measured it: the
        // next plan counts the real figure.
        residency_.SetFootprint(m->id, measured_bytes);
      } else {
        // Any other failure (not in its repository, a broken package) would
        // fail again: the worker is not asked for the model until it
        // registers anew, instead of a retry per failure until the
        // queries' deadlines.
        auto& on = m->loadable_on;
        if (auto it = std::lower_bound(on.begin(), on.end(), worker);
            it != on.end() && *it == worker) {
          on.erase(it);
        }
      }
      e.Log(LogLevel::kWarning, __FILE__, __LINE__,
            absl::StrCat("worker ", *w->name, " failed to load model ", model, ": ",
                         status.message()));
      if (m->scheduler.workers().empty() && residency_.PendingReady(m->id) < 0 &&
          !m->scheduler.empty()) {
        // Another worker, if one can take it (now, or once room frees);
        // else nobody serves it.
        if (EnsureLoadLocked(m, now, &e) >= 0) {
        } else if (CouldHoldLocked(*m)) {
          AwaitRoomLocked(*m);
        } else {
          const absl::Status none = absl::UnavailableError(
              absl::StrCat("model ", model, " could not be loaded: ", status.message()));
          for (QueryId id : m->scheduler.TakeAll()) {
            FailLocked(id, none, QueryOutcome::kUnavailable, now, &e);
          }
        }
      }
      if (residency_.PendingReady(m->id) < 0) cold_since_.erase(m->id);
    } else {
      if (!residency_.FinishLoad(worker, m->id)) return;
      if (measured_bytes > 0 && measured_bytes != residency_.Footprint(m->id)) {
        if (options_.log_lifecycle) {
          e.Log(LogLevel::kInfo, __FILE__, __LINE__,
                absl::StrCat("model ", model, ": worker ", *w->name, " measured ", measured_bytes,
                             " bytes (was ", residency_.Footprint(m->id), ")"));
        }
        residency_.SetFootprint(m->id, measured_bytes);
      }
      m->scheduler.AddWorker(worker);
      Nanos cold = 0;
      if (auto it = cold_since_.find(m->id); it != cold_since_.end()) {
        cold = now - it->second;
        cold_since_.erase(it);
      }
      e.rare_effects().loaded.emplace_back(m->name, w->name, cold);
      ScheduleLocked(m, now, &e);
    }
    RetryAwaitingRoomLocked(now, &e);
  }
  Apply(&e);
}

void ServingCore::OnFootprintMeasured(int32_t worker, const std::string& model, int64_t bytes) {
  if (bytes <= 0) return;
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    ServedModel* m = models_.Find(model);
    const WorkerRecord* w = workers_.GetAlive(worker);
    if (m == nullptr || w == nullptr || bytes == residency_.Footprint(m->id)) return;
    if (options_.log_lifecycle) {
      e.Log(LogLevel::kInfo, __FILE__, __LINE__,
            absl::StrCat("model ", model, ": worker ", *w->name, " measured ", bytes,
                         " bytes storing it (was ", residency_.Footprint(m->id), ")"));
    }
    residency_.SetFootprint(m->id, bytes);
    // A smaller figure may make room for a model waiting for it.
    RetryAwaitingRoomLocked(clock_->Now(), &e);
  }
  Apply(&e);
}

}  // namespace superserve
