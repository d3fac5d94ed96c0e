// The workers: liveness, the batches each holds, free slots, speed and busy
// time.
#ifndef SUPERSERVE_SERVING_WORKER_POOL_H_
#define SUPERSERVE_SERVING_WORKER_POOL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/time.h"
#include "policies/query.h"
#include "serving/free_slot_index.h"
#include "serving/model_registry.h"
#include "serving/worker_channel.h"
#include "serving/worker_speed.h"

namespace superserve {

// A batch a worker holds. `deadline` is when the core stops waiting for it:
// the latest deadline of its queries plus a grace. A batch whose model was
// removed keeps its slot (the worker is still busy with it) but has no
// queries left to answer.
struct InflightBatch {
  uint64_t id = 0;
  ModelId model = 0;
  int32_t subnet_index = -1;
  int32_t exit_threshold_index = -1;  // BatchPlan's
  int32_t batch_size = 0;
  Nanos sent_at = 0;
  Nanos deadline = 0;
  std::vector<QueryId> queries;
};

struct WorkerRecord {
  int32_t id = -1;
  std::shared_ptr<const std::string> name;
  bool alive = true;
  bool emulated = false;
  std::vector<std::string> declared_models;
  std::shared_ptr<WorkerChannel> channel;
  Nanos last_heard = 0;
  Nanos busy = 0;  // summed execution time since busy_since
  Nanos busy_since = 0;
  std::map<uint64_t, InflightBatch> inflight;  // by batch id
  // Per-worker latency estimates (a straggler, docs/faults.md): measured
  // exec / profiled latency, and that over the fleet's (1 = as the fleet).
  WorkerSpeed speed;
  double relative_speed = 1.0;
  // Being told of its registration (outside the core's lock): it takes no
  // batch until that is done, so that none overtakes the registration.
  // Set through WorkerPool::SetRegistering, which keeps the free slots.
  bool registering = false;
  // Its owner is done with the id (Release): once dead too, the record is
  // recycled for a later worker.
  bool released = false;
};

// The workers that registered: liveness (heartbeats, per-batch deadlines),
// the batches each holds, and which have a free slot (a FreeSlotIndex kept
// by every call that changes one). Ids are dense: they index the records. The
// record of a worker that is dead and released by its owner is recycled
// for the next worker added, so a worker that reconnects 10,000 times
// leaves one record, not 10,000, and walks over the records stay as long as
// the fleet. Not thread-safe.
class WorkerPool {
 public:
  // A worker has a free slot while it holds fewer than `lookahead` batches
  // (ServingOptions::lookahead).
  explicit WorkerPool(int32_t lookahead = 1) : lookahead_(lookahead) {}

  // Registers a live worker; its name is "<requested>#<id>" (or "worker-<id>").
  // Its id is a recycled one (dead and released) when there is one.
  int32_t Add(const std::string& requested_name, bool emulated, std::vector<std::string> models,
              std::shared_ptr<WorkerChannel> channel, Nanos now);
  // Any worker whose record is kept (alive, or dead and its record not yet
  // recycled); nullptr for an unknown id.
  WorkerRecord* Get(int32_t id);
  const WorkerRecord* Get(int32_t id) const;
  WorkerRecord* GetAlive(int32_t id);
  int32_t alive() const { return alive_; }

  void Heard(int32_t id, Nanos now);
  // One batch of worker `id` ran in `measured` what its profile puts at
  // `profiled` (WorkerSpeed). Every live worker's relative_speed (its factor
  // over the fleet's lower median) is re-derived while this worker has few
  // samples and then every kSpeedRefreshEvery batches of the pool: the
  // fleet's reference moves slowly, and a refresh walks every record.
  void RecordSpeed(int32_t id, Nanos measured, Nanos profiled);
  static constexpr int64_t kSpeedRefreshEvery = 16;
  // One batch of worker `id` ran for `exec`: its busy time.
  void AddBusy(int32_t id, Nanos exec) {
    if (WorkerRecord* w = GetAlive(id)) w->busy += exec;
  }
  // The gauges of each live worker whose current window is at least
  // `window` long: its busy fraction over the window (capped at 1) and its
  // relative speed; its next window starts at `now`.
  struct WorkerGauges {
    std::shared_ptr<const std::string> name;
    double busy_fraction = 0;
    double relative_speed = 1;
  };
  std::vector<WorkerGauges> TakeGauges(Nanos now, Nanos window);
  // Live, not registering, and holds fewer than `lookahead` batches: how
  // many more it may take.
  int32_t FreeSlots(int32_t id, int32_t lookahead) const;
  int32_t FreeSlots(int32_t id) const { return FreeSlots(id, lookahead_); }
  // The workers with FreeSlots(id) > 0, lowest id first.
  const FreeSlotIndex& free_slots() const { return free_; }
  // A registering worker takes no batch (WorkerRecord::registering).
  void SetRegistering(int32_t id, bool registering);

  void AddInflight(int32_t id, InflightBatch batch);
  // Removes and returns the batch; nullopt if the worker does not hold it
  // (a result for a batch already given up on).
  std::optional<InflightBatch> TakeInflight(int32_t id, uint64_t batch_id);
  // Batches of `model` on live workers with queries still to answer, in
  // O(1): a drain waits on it whenever the core's lock is released.
  int32_t AnsweringBatches(ModelId model) const;
  // The model is being removed: its batches keep their slots (the workers
  // are busy with them) but give up their queries, returned here.
  std::vector<QueryId> TakeQueriesOf(ModelId model);

  // Marks the worker dead and hands back the batches it held. Idempotent:
  // a dead worker returns nothing.
  std::vector<InflightBatch> MarkDead(int32_t id);
  // The owner will not name `id` again (its stream ended): once the worker
  // is dead, its record may be recycled. Idempotent.
  void Release(int32_t id);

  // Live workers silent for longer than `silent_limit`.
  std::vector<int32_t> Silent(Nanos now, Nanos silent_limit) const;
  // Live workers holding a batch past its deadline.
  std::vector<int32_t> Overdue(Nanos now) const;
  // The earliest time a live worker could turn up in Silent (with this
  // limit; <= 0: never) or Overdue; the largest Nanos when none can.
  Nanos NextDeadline(Nanos silent_limit) const;

  std::vector<WorkerRecord>& records() { return workers_; }
  const std::vector<WorkerRecord>& records() const { return workers_; }

 private:
  // Recycles `id` if it is dead and released.
  void RecycleIfDone(int32_t id);
  // Brings free_ in step with the worker's FreeSlots.
  void RefreshFree(int32_t id) { free_.Set(id, FreeSlots(id) > 0); }

  const int32_t lookahead_;
  FreeSlotIndex free_;

  std::vector<WorkerRecord> workers_;
  std::vector<int32_t> recycled_;  // ids whose records the next Add reuses
  // AnsweringBatches, kept by every call that adds, takes or empties a batch.
  absl::flat_hash_map<ModelId, int32_t> answering_;
  void Answered(const InflightBatch& b);
  int64_t speed_records_ = 0;
  std::vector<double> speed_scratch_;  // RecordSpeed's, kept: no allocation per refresh
  int32_t alive_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_WORKER_POOL_H_
