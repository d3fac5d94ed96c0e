// The serving core: coordinates the registry, the pool and the models'
// schedulers under one lock, and answers every query exactly once.
#ifndef SUPERSERVE_SERVING_SERVING_CORE_H_
#define SUPERSERVE_SERVING_SERVING_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/model_profile.h"
#include "policies/policy.h"
#include "serving/batch.h"
#include "serving/model_registry.h"
#include "serving/model_summary.h"
#include "serving/pending_queries.h"
#include "serving/query_handle.h"
#include "serving/serving_observer.h"
#include "serving/wake_queue.h"
#include "absl/time/time.h"
#include "serving/active_models.h"
#include "serving/admission.h"
#include "serving/application_registry.h"
#include "serving/core_effects.h"
#include "serving/residency.h"
#include "serving/result_matcher.h"
#include "serving/worker_channel.h"
#include "serving/worker_pool.h"

namespace superserve {

struct ServingOptions {
  // Batches a worker may hold at once (1 = the next batch is decided only
  // when the worker is free; k > 1 pipelines k batches).
  int32_t lookahead = 1;
  // Live queued queries per model beyond which arrivals get
  // RESOURCE_EXHAUSTED (expired and cancelled ones do not count).
  size_t max_queue = 100000;
  // Workers heartbeat this often; a worker silent (no heartbeat, no result)
  // for more than `missed_heartbeats` intervals is marked dead. 2 is the
  // least that tolerates one late heartbeat, and bounds the detection of a
  // partitioned worker (a connection that silently stops forwarding, no RST)
  // by 2 intervals plus one tick (docs/faults.md). 0 = no heartbeat check
  // (the simulator's emulated workers).
  Nanos heartbeat_interval = Millis(500);
  int32_t missed_heartbeats = 2;
  // A batch not answered by its latest query deadline plus this marks its
  // worker dead (hung), whatever its heartbeats say.
  Nanos batch_grace = Seconds(1);
  // How often Tick runs at the latest while queries are pending: sweeps
  // expired and cancelled queries out of the queues (answered without
  // waiting for a worker), checks liveness, refreshes gauges.
  Nanos tick_interval = Millis(10);
  // With no query pending, Tick asks to run only when a worker's silence or
  // a batch's deadline could run out, and at least this often (gauges): an
  // idle router's timer sleeps instead of ticking every tick_interval.
  Nanos idle_tick_interval = Seconds(1);
  // Distinct application tags the core keeps state for (they are never
  // forgotten); a query with a new tag beyond the cap, or a tag longer than
  // `max_application_bytes`, is INVALID_ARGUMENT naming the bound. 0 = no cap.
  size_t max_applications = 1024;
  size_t max_application_bytes = 256;
  // Overload shedding (admission and head shedding), applied to every
  // model's scheduler whatever its policy (serving/model_scheduler.h).
  OverloadOptions overload;
  // Per-worker latency estimates (docs/faults.md, slow worker): each
  // worker's measured exec / profiled latency, relative to the fleet's, scales
  // the slack its policy plans with, and its telemetry is divided by it
  // before it reaches the policy's shared estimates. false: one estimate for
  // every worker (a straggler's batches raise everyone's).
  bool per_worker_speed = true;
  // Log models and workers coming and going (INFO/WARNING); the simulator
  // turns it off.
  bool log_lifecycle = true;
  // Placement (workers with a memory budget): a model's recent demand, the
  // value eviction ranks it by, is its arrivals decayed with this half-life.
  Nanos demand_half_life = Seconds(10);
  // A model whose queue holds more than this many queries per replica gets
  // one more replica (a load evicting only colder models); 0 = never.
  int32_t replicate_queue = 16;
};

struct ServingStats {
  int64_t accepted = 0;   // queries that entered a queue
  int64_t answered = 0;   // terminal answers of accepted queries
  int64_t requeued = 0;   // put back after their batch did not complete
  int64_t cancelled = 0;  // queued queries whose client gave up
  int64_t swept = 0;      // answered by the sweep (expired or cancelled)
  int64_t shed = 0;       // answered DEADLINE_EXCEEDED by the overload shedding
  // Answered DEADLINE_EXCEEDED on arrival: less time left than the model's
  // fastest batch of one takes.
  int64_t late_on_arrival = 0;
  int64_t refused = 0;    // batches a worker refused: their window had closed
  int64_t batches = 0;
  int64_t pending = 0;
  int32_t workers_alive = 0;
  // Workers' records held: the live ones, and dead ones whose owner has not
  // yet reported them gone (OnWorkerGone); the rest are recycled.
  int32_t worker_records = 0;
  int32_t models = 0;
  // Placement: loads and unloads asked of workers; queries answered
  // DEADLINE_EXCEEDED at once because their model could not be loaded in
  // time.
  int64_t loads = 0;
  int64_t unloads = 0;
  int64_t load_too_late = 0;
};

struct WorkerRegistration {
  std::string name;  // requested; the core appends "#<id>"
  bool emulated = false;
  std::vector<std::string> models;  // the models the worker can serve
  // Bytes of model memory (0 = unlimited: every declared model is resident
  // for good, as before placement). With a budget the worker starts empty
  // and the core loads and unloads its declared models as demand asks
  // (serving/residency.h, docs/engine.md "Placement"); its channel must
  // implement Load/Unload.
  int64_t memory_bytes = 0;
};

// What a query asks for. `payload` is the input the worker will need.
struct QueryRequest {
  absl::string_view model;
  absl::string_view application;
  Nanos deadline = 0;  // absolute, on the core's clock
  std::shared_ptr<QueryPayload> payload;
};

// The serving core: the router's scheduling path without gRPC, and the
// simulator's without emulation. It ties a ModelRegistry (what is served), a
// WorkerPool (who serves, what each holds) and one ModelScheduler per model
// (queue, policy, the rules for applying a decision), and keeps the one
// contract: every query handed to Submit gets exactly one answer.
//
// Thread-safe. One mutex keeps the three consistent; it is never held while
// calling out: answers, channel sends (which encode the inputs) and observer
// calls all run after it is released, on the calling thread. Checked by
// clang's -Wthread-safety: state is ABSL_GUARDED_BY the mutex, the ...Locked
// methods require it, and the public methods and Apply exclude it (none runs
// under it: no callback re-enters the core).
//
// Cost per decision, in the registered models M: O(1) to find an arrival's
// model (hash), O(A log A) for a free worker over the A models with queued
// queries, O(W/64) to offer a model its free workers (bitmap), O(log M) per
// policy wake-up (heap); placement adds O(1) per arrival (demand) and
// Residency::Plan's cost per load. Only worker loss, registration and the
// per-tick gauges (with an observer) walk every model
// (`superserve-bench scheduler`: decisions/s at 10, 1,000, 10,000 models).
//
// Time comes from `clock`; nothing runs by itself. The owner calls Tick when
// it asked to be called (the router from a timer thread, the simulator from
// its event loop), and is told of an earlier wake-up via `request_tick`.
class ServingCore {
 public:
  ServingCore(ServingOptions options, const Clock* clock, ServingObserver* observer = nullptr,
              std::function<void(Nanos)> request_tick = nullptr);
  ~ServingCore();
  ServingCore(const ServingCore&) = delete;
  ServingCore& operator=(const ServingCore&) = delete;

  // --- models
  // Serves `profile` with `policy`; workers that declared the model attach.
  absl::Status AddModel(const ModelProfile& profile, std::unique_ptr<Policy> policy)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Stops serving: queued and in-flight queries are answered UNAVAILABLE, and
  // the model's queue, policy and profile are freed, and the workers'
  // declarations of it forgotten. A removed model's late batch results are
  // ignored.
  absl::Status RemoveModel(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // Unregistering with a drain: new queries for the model are refused
  // (INVALID_ARGUMENT, "being unregistered"), queued and in-flight ones are
  // still served; RemoveModel once it is drained. `on_drained` (optional)
  // is that event: it runs once, after the lock is released, when the model
  // has nothing queued and no batch with queries on a worker (at once if so
  // already), or is removed, or the core shuts down.
  absl::Status CloseModel(const std::string& name, std::function<void()> on_drained = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<ModelSummary> ListModels() const ABSL_LOCKS_EXCLUDED(mu_);

  // --- queries. Always answers through `handle`, now or later. `check` runs
  // under the lock once the model is known (e.g. validates the input against
  // its profile); it must be O(1) and must not call back into the core.
  using InputCheck = absl::FunctionRef<absl::Status(const ModelProfile&)>;
  void Submit(QueryHandle* handle, QueryRequest request, InputCheck check) ABSL_LOCKS_EXCLUDED(mu_);
  void Submit(QueryHandle* handle, QueryRequest request) ABSL_LOCKS_EXCLUDED(mu_);
  // The client gave up. A queued query is answered DEADLINE_EXCEEDED by the
  // next sweep (or when a dispatch reaches it) and never runs; one on a
  // worker is answered when its batch returns. Never answers inline.
  void OnCancelled(QueryHandle* handle) ABSL_LOCKS_EXCLUDED(mu_);

  // --- workers
  absl::StatusOr<int32_t> RegisterWorker(const WorkerRegistration& worker,
                                         std::shared_ptr<WorkerChannel> channel)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The worker loaded `model` after registering (a hot registration): it
  // serves it from now on, and will once the model is added.
  absl::Status AttachWorker(int32_t worker, const std::string& model) ABSL_LOCKS_EXCLUDED(mu_);
  void OnHeartbeat(int32_t worker) ABSL_LOCKS_EXCLUDED(mu_);
  void OnBatchResult(int32_t worker, BatchOutcome outcome) ABSL_LOCKS_EXCLUDED(mu_);
  // The worker finished (or failed) loading `model` (WorkerChannel::Load):
  // it serves the model from now on. A stale report (the model or the
  // worker gone, or not loading there) is ignored. `measured_bytes` > 0: the
  // footprint the worker measured, which replaces the profile's figure
  // (Residency::SetFootprint); 0 = not measured. A failed load without a
  // figure (not a matter of memory) is not asked of that worker again.
  void OnModelLoaded(int32_t worker, const std::string& model, const absl::Status& status,
                     int64_t measured_bytes = 0) ABSL_LOCKS_EXCLUDED(mu_);
  // The worker measured `model`'s footprint without keeping it loaded (a
  // stored package's trial load): `bytes` > 0 replaces the profile's figure
  // at once, so that placement plans the first load with it. Ignored for a
  // model or worker unknown here.
  void OnFootprintMeasured(int32_t worker, const std::string& model, int64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The worker's in-flight queries are re-queued if they can still make
  // their deadline, else answered DEADLINE_EXCEEDED. The owner's last call
  // for `worker` (its stream ended): the id may then name a later worker
  // (its record is recycled), so the owner must not call it twice. A worker
  // the core declared dead itself (silent, hung) keeps its id until then.
  void OnWorkerGone(int32_t worker, const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);

  // Fires due policy wake-ups, sweeps expired and cancelled queries, marks
  // silent and hung workers dead, refreshes gauges. Returns when it next
  // wants to run: within tick_interval while queries are pending, else
  // when a liveness check or the idle refresh is due
  // (ServingOptions::idle_tick_interval); an arrival asks for an earlier
  // tick through `request_tick`.
  Nanos Tick() ABSL_LOCKS_EXCLUDED(mu_);

  // Stops accepting queries (new ones are answered UNAVAILABLE, "draining");
  // what is queued or on a worker is served as usual. Idempotent; Shutdown
  // ends it. `on_idle` (optional) is the event of the drain's end, as
  // CloseModel's on_drained for one model: it runs once, after the lock is
  // released, when no accepted query is left (at once if none is), or the
  // core shuts down.
  void Drain(std::function<void()> on_idle = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // Answers everything pending UNAVAILABLE and closes every worker channel.
  // Later calls are refused (UNAVAILABLE).
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  ServingStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const Clock* clock() const { return clock_; }

 private:
  friend class ServingCoreTestPeer;  // tests: whether mu_ is free at a call-out
  // Work decided under mu_ and carried out after it is released.
  using Effects = CoreEffects;

  // Puts the live-worker count into `e`, numbered: Apply runs outside mu_,
  // so two registrations can apply out of order, and only a newer count
  // than the last reported one reaches the observer (a gauge left at 1
  // with 2 workers alive otherwise).
  void NoteWorkersAliveLocked(Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Brings the next housekeeping forward to `t` (if later), asking the
  // owner for a tick then.
  void HousekeepByLocked(Nanos t, Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long a worker may stay silent before it is declared dead; 0: no
  // heartbeat check.
  Nanos SilentLimit() const {
    return options_.missed_heartbeats > 0 && options_.heartbeat_interval > 0
               ? options_.heartbeat_interval * options_.missed_heartbeats
               : 0;
  }

  // Carries out `e` (channel sends, answers, observer calls, request_tick,
  // drained callbacks) with mu_ released: with RegisterWorker's
  // OnRegistered, the core's only calls out.
  void Apply(Effects* e) ABSL_LOCKS_EXCLUDED(mu_);
  // Apply's part when a closed model's query was answered: moves the
  // callbacks of the closed models drained now into `e` (takes the lock).
  void CollectDrained(Effects* e) ABSL_LOCKS_EXCLUDED(mu_);
  // Offers the model's free workers, except `except`, to its scheduler.
  void ScheduleLocked(ServedModel* m, Nanos now, Effects* e, int32_t except = -1)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One round of ScheduleLocked: the model's policy over the slots in slots_.
  void ScheduleOfferLocked(ServedModel* m, Nanos now, Effects* e, double worker_speed = 1.0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The worker's speed relative to the fleet (1 with per_worker_speed off).
  double SpeedLocked(int32_t worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleWorkerLocked(int32_t worker, Nanos now, Effects* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Placement, for an arrival of `m` due at `deadline`: notes the demand;
  // 0 when a worker holds the model or the query waits for room (below),
  // else when its load completes (planned now unless pending; -1: no live
  // worker can ever load it).
  Nanos PlaceForArrivalLocked(ServedModel* m, Nanos deadline, Nanos now, Effects* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One more replica of a model whose queue holds more than
  // ServingOptions::replicate_queue per replica (evicting colder models only).
  void MaybeReplicateLocked(ServedModel* m, Nanos deadline, Nanos now, Effects* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Placement. A model's queries wait for a load when no worker holds it:
  // the load is planned (Residency::Plan) unless one is pending, queries
  // that cannot finish after it are answered DEADLINE_EXCEEDED, and the
  // time it completes is returned (-1: no budgeted worker can take it).
  Nanos EnsureLoadLocked(ServedModel* m, Nanos now, Effects* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Plans and starts one load of `m` (evicting as planned, only models of
  // less demand than `max_victim_demand`); when it completes, -1 if none fits.
  Nanos StartLoadLocked(ServedModel* m, Nanos now, double max_victim_demand,
                        Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers the queued queries of `m` that a load ready at `ready` cannot
  // serve in time.
  void DropUnreachableLocked(ServedModel* m, Nanos ready, Nanos now, Effects* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A batch of `model` in flight on `worker`.
  bool BusyWithLocked(int32_t worker, ModelId model) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Some live budgeted worker could hold `m` once room frees (its budget is
  // at least the model's footprint).
  bool CouldHoldLocked(const ServedModel& m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Plans the loads of the models in awaiting_room_ again: after a batch or
  // a load ends (a resident model may be evicted now) or a worker joins.
  void RetryAwaitingRoomLocked(Nanos now, Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AwaitRoomLocked(const ServedModel& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DispatchLocked(ServedModel* m, TakenBatch taken, Nanos now, Effects* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers an accepted query and forgets it.
  void AnswerLocked(QueryId id, QueryAnswer answer, QueryOutcome outcome, Nanos now, Effects* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rest of answering, for a query the caller found (of model `m`, may
  // be null) and whose `answer` it already put in the effects: a batch's
  // answers then cost one lookup per query, none for the model, and no copy.
  void ReportAnsweredLocked(PendingQueries::iterator it, const ServedModel* m,
                            const QueryAnswer& answer, QueryOutcome outcome, Nanos now,
                            Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(QueryId id, const absl::Status& status, QueryOutcome outcome, Nanos now,
                  Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequeueLocked(QueryId id, Nanos now, Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers the model's expired and cancelled queued queries.
  void SweepLocked(ServedModel* m, Nanos now, Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerGoneLocked(int32_t worker, const absl::Status& why, Nanos now, Effects* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RejectLocked(QueryHandle* handle, absl::string_view model, const absl::Status& status,
                    QueryOutcome outcome, Nanos now, Effects* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Nothing queued for the model and no batch of its queries on a worker
  // (true for an unknown model).
  bool ModelDrainedLocked(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The tag's id; a new tag is named to every model's scheduler.
  int32_t ApplicationIdLocked(absl::string_view application) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServingOptions options_;
  const Clock* const clock_;
  ServingObserver* const observer_;  // may be null
  const std::function<void(Nanos)> request_tick_;
  const std::shared_ptr<const std::string> unknown_model_ =
      std::make_shared<const std::string>("_unknown");

  const Admission admission_;  // the checks before a query is queued
  mutable absl::Mutex mu_;
  uint64_t workers_alive_version_ ABSL_GUARDED_BY(mu_) = 0;
  // Apply's side of NoteWorkersAliveLocked: the version last reported.
  absl::Mutex alive_report_mu_ ABSL_ACQUIRED_AFTER(mu_);
  uint64_t alive_reported_version_ ABSL_GUARDED_BY(alive_report_mu_) = 0;
  ModelRegistry models_ ABSL_GUARDED_BY(mu_);
  WorkerPool workers_ ABSL_GUARDED_BY(mu_);
  PendingQueries pending_ ABSL_GUARDED_BY(mu_);
  ApplicationRegistry applications_ ABSL_GUARDED_BY(mu_);
  uint64_t next_batch_id_ ABSL_GUARDED_BY(mu_) = 0;
  ServingStats stats_ ABSL_GUARDED_BY(mu_);
  // Placement: what budgeted workers hold (empty: no worker has a budget).
  Residency residency_ ABSL_GUARDED_BY(mu_);
  // Per model waiting for a load: when its first query found it resident
  // nowhere (the cold start's start).
  absl::flat_hash_map<ModelId, Nanos> cold_since_ ABSL_GUARDED_BY(mu_);
  // Models whose queries wait for room: every worker that could hold one is
  // full of models it may not evict now (a batch in flight, or the last
  // holder of a model with queued queries). Their queries expire in the
  // sweep if no room frees in time.
  std::vector<ModelId> awaiting_room_ ABSL_GUARDED_BY(mu_);
  std::vector<FreeSlot> slots_ ABSL_GUARDED_BY(mu_);  // scratch
  ScheduleResult schedule_scratch_ ABSL_GUARDED_BY(mu_);  // ScheduleOfferLocked's
  std::vector<QueryId> sweep_expired_ ABSL_GUARDED_BY(mu_);    // scratch
  std::vector<QueryId> sweep_cancelled_ ABSL_GUARDED_BY(mu_);  // scratch
  // OnBatchResult's, kept between batches: no allocation per batch.
  ResultMatcher result_matcher_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<Nanos, ServedModel*>> order_scratch_ ABSL_GUARDED_BY(mu_);
  ActiveModels<ServedModel> active_ ABSL_GUARDED_BY(mu_);
  std::vector<ServedModel*> active_scratch_ ABSL_GUARDED_BY(mu_);
  // Policy wake-ups, one per model at its wake_listed, earliest first. A
  // listed wake-up is current while the model's scheduler still asks for it
  // (a decision taken since may have answered it otherwise).
  WakeQueue<ServedModel> wakes_ ABSL_GUARDED_BY(mu_);
  // Liveness checks, busy fractions and queue gauges run at most once per
  // tick interval: Ticks asked for by policy wake-ups come far more often.
  Nanos next_housekeeping_ ABSL_GUARDED_BY(mu_) = 0;
  Nanos last_housekeeping_ ABSL_GUARDED_BY(mu_) = 0;
  Nanos next_tick_ ABSL_GUARDED_BY(mu_) = 0;          // when the owner will Tick next
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  // CloseModel's on_drained, by model name, until the model drains.
  absl::flat_hash_map<std::string, std::function<void()>> on_drained_ ABSL_GUARDED_BY(mu_);
  // Drain's on_idle callbacks, run once no query is pending.
  std::vector<std::function<void()>> on_idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_SERVING_CORE_H_
