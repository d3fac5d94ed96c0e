// Placement: which models each budgeted worker holds or loads, and where a
// load costs least.
#ifndef SUPERSERVE_SERVING_RESIDENCY_H_
#define SUPERSERVE_SERVING_RESIDENCY_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "common/time.h"
#include "serving/model_registry.h"

namespace superserve {

// Placement (issue 43, Clockwork's LOAD/UNLOAD): which models are resident,
// or being loaded, on which worker with a memory budget, the memory they
// take, and each model's recent demand. It plans a load (the worker where it
// costs least, and the models to evict there) and records what the serving
// core then carries out. Workers without a budget are not tracked (every
// model they declare stays resident for good, as before). Not thread-safe.
//
// Cost: Note*/Start/Finish/State are O(1) (hash maps; a model's replicas are
// a short list). Plan is O(W * R log R) for W budgeted workers holding R
// models each; it runs once per load, never per scheduling decision.
class Residency {
 public:
  enum class State { kNone, kLoading, kResident };

  // Demand is an exponentially decayed count of arrivals with this half-life.
  explicit Residency(Nanos demand_half_life = Seconds(10));

  // A worker with `budget` bytes (> 0) of model memory; nothing resident.
  void AddWorker(int32_t worker, int64_t budget);
  // Forgets the worker and what it held; returns the models it held or was
  // loading (each once).
  std::vector<ModelId> RemoveWorker(int32_t worker);
  bool Tracks(int32_t worker) const { return workers_.contains(worker); }
  bool empty() const { return workers_.empty(); }

  // A model's footprint and load time (from its profile).
  void AddModel(ModelId model, int64_t bytes, Nanos load_time);
  // The footprint a worker measured when it loaded the model replaces the
  // profile's figure (every replica's memory is counted anew; a worker may
  // then be over its budget until its next load evicts). Ignored for an
  // unknown model or bytes < 0.
  void SetFootprint(ModelId model, int64_t bytes);
  int64_t Footprint(ModelId model) const;
  // Forgets the model; returns the workers that held or were loading it.
  std::vector<int32_t> RemoveModel(ModelId model);

  void NoteDemand(ModelId model, Nanos now);
  double Demand(ModelId model, Nanos now) const;

  State StateOf(int32_t worker, ModelId model) const;
  // The earliest time a pending load of `model` completes (as planned);
  // -1 when none is pending.
  Nanos PendingReady(ModelId model) const;
  // Workers holding or loading the model.
  int32_t Replicas(ModelId model) const;

  struct LoadPlan {
    int32_t worker = -1;  // -1: no worker can take it
    Nanos ready = 0;      // when the load is planned to complete
    std::vector<ModelId> evict;
    double evicted_demand = 0;
  };
  // Where to load `model` at `now`: among tracked workers that `eligible`
  // accepts and that do not hold it, the ones whose memory can be freed by
  // evicting resident models that `pinned` does not protect (a batch in
  // flight, queries waiting only for it), least demand first, and only
  // models of less demand than `max_victim_demand` (a replica of a hot
  // model does not push out warmer ones). Of those, the one whose load
  // completes soonest, counted in whole load times (loads queue on a
  // worker: an idle loading engine wins), then the one evicting the least
  // demand, then the earliest ready, then the lowest id.
  LoadPlan Plan(ModelId model, Nanos now, absl::FunctionRef<bool(int32_t worker)> eligible,
                absl::FunctionRef<bool(int32_t worker, ModelId model)> pinned,
                double max_victim_demand = 1e300) const;
  // Carries out a plan: evicts its victims (their memory is free at once)
  // and reserves the model's memory on the worker, loading until `ready`.
  // The worker loads one model at a time: later loads queue behind.
  void StartLoad(ModelId model, const LoadPlan& plan);
  // The worker reports the load done: resident. False if it was not loading
  // it (a stale report: the worker or the model is gone).
  bool FinishLoad(int32_t worker, ModelId model);
  // The load failed: its memory is freed.
  void FailLoad(int32_t worker, ModelId model);

  int64_t used(int32_t worker) const;
  int64_t budget(int32_t worker) const;

 private:
  struct WorkerMemory {
    int64_t budget = 0;
    int64_t used = 0;
    Nanos load_free_at = 0;  // its loading engine is busy until then
    absl::flat_hash_map<ModelId, State> models;
  };
  struct ModelInfo {
    int64_t bytes = 0;
    Nanos load_time = 0;
    double demand = 0;
    Nanos demand_at = 0;
    std::vector<std::pair<int32_t, Nanos>> replicas;  // (worker, ready; 0 once resident)
  };
  void Drop(int32_t worker, ModelId model);

  const double decay_per_ns_;
  absl::flat_hash_map<int32_t, WorkerMemory> workers_;
  absl::flat_hash_map<ModelId, ModelInfo> models_;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_RESIDENCY_H_
