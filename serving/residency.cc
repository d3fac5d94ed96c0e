// Residency: placement plans and records (residency.h).
#include "serving/residency.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace superserve {

Residency::Residency(Nanos demand_half_life)
    : decay_per_ns_(std::log(2.0) / static_cast<double>(std::max<Nanos>(1, demand_half_life))) {}

void Residency::AddWorker(int32_t worker, int64_t budget) {
  WorkerMemory& w = workers_[worker];
  w = WorkerMemory();
  w.budget = budget;
}

std::vector<ModelId> Residency::RemoveWorker(int32_t worker) {
  std::vector<ModelId> held;
  auto it = workers_.find(worker);
  if (it == workers_.end()) return held;
  for (const auto& [model, state] : it->second.models) held.push_back(model);
  std::sort(held.begin(), held.end());
  for (ModelId m : held) {
    auto mi = models_.find(m);
    if (mi == models_.end()) continue;
    auto& r = mi->second.replicas;
    r.erase(std::remove_if(r.begin(), r.end(), [&](const auto& p) { return p.first == worker; }),
            r.end());
  }
  workers_.erase(it);
  return held;
}

void Residency::AddModel(ModelId model, int64_t bytes, Nanos load_time) {
  ModelInfo& m = models_[model];
  m.bytes = std::max<int64_t>(0, bytes);
  m.load_time = std::max<Nanos>(0, load_time);
}

void Residency::SetFootprint(ModelId model, int64_t bytes) {
  auto it = models_.find(model);
  if (it == models_.end() || bytes < 0) return;
  const int64_t delta = bytes - it->second.bytes;
  for (const auto& [w, ready] : it->second.replicas) {
    if (auto wi = workers_.find(w); wi != workers_.end()) wi->second.used += delta;
  }
  it->second.bytes = bytes;
}

int64_t Residency::Footprint(ModelId model) const {
  auto it = models_.find(model);
  return it == models_.end() ? 0 : it->second.bytes;
}

std::vector<int32_t> Residency::RemoveModel(ModelId model) {
  std::vector<int32_t> held;
  auto it = models_.find(model);
  if (it == models_.end()) return held;
  for (const auto& [w, ready] : it->second.replicas) held.push_back(w);
  for (int32_t w : held) {
    auto wi = workers_.find(w);
    if (wi == workers_.end()) continue;
    wi->second.models.erase(model);
    wi->second.used -= it->second.bytes;
  }
  models_.erase(it);
  return held;
}

void Residency::NoteDemand(ModelId model, Nanos now) {
  auto it = models_.find(model);
  if (it == models_.end()) return;
  ModelInfo& m = it->second;
  m.demand = Demand(model, now) + 1;
  m.demand_at = std::max(now, m.demand_at);
}

double Residency::Demand(ModelId model, Nanos now) const {
  auto it = models_.find(model);
  if (it == models_.end()) return 0;
  const ModelInfo& m = it->second;
  if (now <= m.demand_at) return m.demand;
  return m.demand * std::exp(-decay_per_ns_ * static_cast<double>(now - m.demand_at));
}

Residency::State Residency::StateOf(int32_t worker, ModelId model) const {
  auto wi = workers_.find(worker);
  if (wi == workers_.end()) return State::kNone;
  auto it = wi->second.models.find(model);
  return it == wi->second.models.end() ? State::kNone : it->second;
}

Nanos Residency::PendingReady(ModelId model) const {
  auto it = models_.find(model);
  if (it == models_.end()) return -1;
  Nanos best = -1;
  for (const auto& [w, ready] : it->second.replicas) {
    if (ready > 0 && (best < 0 || ready < best)) best = ready;
  }
  return best;
}

int32_t Residency::Replicas(ModelId model) const {
  auto it = models_.find(model);
  return it == models_.end() ? 0 : static_cast<int32_t>(it->second.replicas.size());
}

Residency::LoadPlan Residency::Plan(ModelId model, Nanos now,
                                    absl::FunctionRef<bool(int32_t)> eligible,
                                    absl::FunctionRef<bool(int32_t, ModelId)> pinned,
                                    double max_victim_demand) const {
  LoadPlan best;
  Nanos best_key = 0;
  auto mi = models_.find(model);
  if (mi == models_.end()) return best;
  const ModelInfo& m = mi->second;
  const Nanos slot = std::max<Nanos>(1, m.load_time);
  std::vector<std::pair<double, ModelId>> candidates;
  // Workers in id order: the choice does not depend on the hash map's order.
  std::vector<int32_t> ids;
  ids.reserve(workers_.size());
  for (const auto& [id, w] : workers_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (int32_t id : ids) {
    const WorkerMemory& w = workers_.at(id);
    if (m.bytes > w.budget || w.models.contains(model) || !eligible(id)) continue;
    LoadPlan p;
    p.worker = id;
    p.ready = std::max(now, w.load_free_at) + m.load_time;
    int64_t need = w.used + m.bytes - w.budget;
    if (need > 0) {
      candidates.clear();
      for (const auto& [victim, state] : w.models) {
        if (state != State::kResident || pinned(id, victim)) continue;
        const double d = Demand(victim, now);
        if (d >= max_victim_demand) continue;
        candidates.emplace_back(d, victim);
      }
      std::sort(candidates.begin(), candidates.end());
      for (const auto& [d, victim] : candidates) {
        if (need <= 0) break;
        p.evict.push_back(victim);
        p.evicted_demand += d;
        need -= models_.at(victim).bytes;
      }
      if (need > 0) continue;  // cannot make room here
    }
    // Loads queue on a worker's loading engine: the fewest load times until
    // ready first (a worker whose engine is busy waits), then the least
    // demand evicted, then the earliest ready.
    const Nanos key = (p.ready - now) / slot;
    bool better;
    if (best.worker < 0 || key != best_key) {
      better = best.worker < 0 || key < best_key;
    } else if (p.evicted_demand != best.evicted_demand) {
      better = p.evicted_demand < best.evicted_demand;
    } else {
      better = p.ready < best.ready;
    }
    if (better) {
      best = std::move(p);
      best_key = key;
    }
  }
  return best;
}

void Residency::Drop(int32_t worker, ModelId model) {
  auto wi = workers_.find(worker);
  auto mi = models_.find(model);
  if (wi == workers_.end() || mi == models_.end()) return;
  if (wi->second.models.erase(model) == 0) return;
  wi->second.used -= mi->second.bytes;
  auto& r = mi->second.replicas;
  r.erase(std::remove_if(r.begin(), r.end(), [&](const auto& p) { return p.first == worker; }),
          r.end());
}

void Residency::StartLoad(ModelId model, const LoadPlan& plan) {
  auto wi = workers_.find(plan.worker);
  auto mi = models_.find(model);
  if (wi == workers_.end() || mi == models_.end()) return;
  for (ModelId victim : plan.evict) Drop(plan.worker, victim);
  WorkerMemory& w = wi->second;
  w.models[model] = State::kLoading;
  w.used += mi->second.bytes;
  w.load_free_at = plan.ready;
  mi->second.replicas.emplace_back(plan.worker, std::max<Nanos>(1, plan.ready));
}

bool Residency::FinishLoad(int32_t worker, ModelId model) {
  auto wi = workers_.find(worker);
  if (wi == workers_.end()) return false;
  auto it = wi->second.models.find(model);
  if (it == wi->second.models.end() || it->second != State::kLoading) return false;
  it->second = State::kResident;
  for (auto& [w, ready] : models_.at(model).replicas) {
    if (w == worker) ready = 0;
  }
  return true;
}

void Residency::FailLoad(int32_t worker, ModelId model) {
  if (StateOf(worker, model) == State::kLoading) Drop(worker, model);
}

int64_t Residency::used(int32_t worker) const {
  auto wi = workers_.find(worker);
  return wi == workers_.end() ? 0 : wi->second.used;
}

int64_t Residency::budget(int32_t worker) const {
  auto wi = workers_.find(worker);
  return wi == workers_.end() ? 0 : wi->second.budget;
}

}  // namespace superserve
