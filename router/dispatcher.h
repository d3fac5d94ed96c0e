#ifndef SUPERSERVE_ROUTER_DISPATCHER_H_
#define SUPERSERVE_ROUTER_DISPATCHER_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/model_profile.h"
#include "policies/edf_queue.h"
#include "policies/policy.h"
#include "policies/policy_factory.h"
#include "router/query_responder.h"
#include "router/router_metrics.h"
#include "router/worker_connection.h"
#include "superserve/v1/admin.pb.h"
#include "superserve/v1/worker.pb.h"

namespace superserve {

struct DispatcherOptions {
  std::string policy = "slackfit";
  PolicyConfig policy_config;
  // Batches a worker may hold at once (1 = the next batch is decided only
  // when the worker is free; k > 1 pipelines k batches).
  int32_t lookahead = 1;
  // Pending queries per model beyond which arrivals get RESOURCE_EXHAUSTED.
  size_t max_queue = 100000;
  // Workers heartbeat this often; `missed_heartbeats` silent intervals mark
  // a worker dead.
  Nanos heartbeat_interval = Millis(500);
  int32_t missed_heartbeats = 4;
  // Run a thread that fires policy wake-ups and heartbeat checks. Off in
  // unit tests, which call Tick() on a simulated clock.
  bool run_timer_thread = true;
};

// Counters for tests and shutdown logs.
struct DispatcherStats {
  int64_t accepted = 0;   // queries that entered a queue
  int64_t answered = 0;   // terminal answers of accepted queries
  int64_t requeued = 0;   // queries put back after their worker died
  int64_t cancelled = 0;  // queued queries whose client gave up (OnCancelled)
  int64_t batches = 0;
  int64_t pending = 0;
  int32_t workers_alive = 0;
};

// The router's critical path (SuperServe Fig. 7, steps 1-3 and 7): holds one
// EDF queue and one Policy per model, asks the policy whenever a worker is
// free and the queue is non-empty, and turns each Decision into a Batch on the
// chosen worker's stream. Every accepted query gets exactly one Answer: OK
// with the output, or DEADLINE_EXCEEDED / UNAVAILABLE / RESOURCE_EXHAUSTED /
// INVALID_ARGUMENT / the worker's error. A dead worker's in-flight queries go
// back to the queue if they can still meet their deadline.
//
// One mutex guards the scheduling state; network writes and answers happen
// after it is released. The scheduling decisions themselves all come from
// policies/ (see PolicyFactory).
class Dispatcher {
 public:
  Dispatcher(DispatcherOptions options, const Clock* clock, RouterMetrics* metrics);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // --- models (startup and the Admin service)
  absl::Status AddModel(const ModelProfile& profile);
  absl::Status RemoveModel(const std::string& name);
  std::vector<v1::ModelInfo> ListModels() const;

  // --- client queries. Always answers, now or later. `deadline` is absolute
  // on the dispatcher's clock.
  void Submit(QueryResponder* query, Nanos deadline);
  // The client gave up (deadline passed or call cancelled). A query still
  // waiting in the queue is marked so that it is answered instead of being
  // dispatched when its turn comes: under overload this keeps workers off
  // queries nobody waits for. (It is not answered here: gRPC's OnCancel is
  // no place to Finish the call.) One already on a worker is answered when
  // its batch returns.
  void OnCancelled(QueryResponder* query);

  // --- workers. RegisterWorker sends the RegisterAck itself (before any
  // batch) and returns the worker's index.
  absl::StatusOr<int32_t> RegisterWorker(const v1::RegisterWorker& hello,
                                         std::shared_ptr<WorkerConnection> connection);
  void OnHeartbeat(int32_t worker);
  void OnBatchResult(int32_t worker, const v1::BatchResult& result);
  // Idempotent. Re-queues or fails the worker's in-flight queries.
  void OnWorkerGone(int32_t worker, const absl::Status& why);

  // Fires due policy wake-ups, marks silent workers dead, refreshes gauges.
  // Returns when it next wants to run.
  Nanos Tick();

  // Answers every pending query UNAVAILABLE and stops the timer thread.
  void Shutdown();

  DispatcherStats Stats() const;
  const Clock* clock() const { return clock_; }

 private:
  struct Pending {
    Query query;
    QueryResponder* responder = nullptr;
    int32_t model = -1;  // index into models_
    Nanos dispatched_at = 0;
    bool on_worker = false;  // false while it waits in the EDF queue
    bool cancelled = false;  // the client gave up while it was queued
  };
  struct InflightBatch {
    int32_t model = -1;
    int32_t subnet_index = -1;
    int32_t batch_size = 0;  // the policy's profiled batch size
    Nanos sent_at = 0;
    std::vector<QueryId> queries;
  };
  struct WorkerState {
    std::string name;
    bool alive = true;
    bool emulated = false;
    std::vector<std::string> declared_models;
    std::shared_ptr<WorkerConnection> connection;
    Nanos last_heard = 0;
    Nanos busy = 0;            // summed exec time since last gauge refresh
    Nanos busy_window_start = 0;
    std::map<uint64_t, InflightBatch> inflight;  // batch id -> batch (<= lookahead)
  };
  struct ModelState {
    std::string name;
    bool removed = false;
    ModelProfile profile;
    Nanos fastest = 0;  // fastest profiled latency (batch 1); re-queue feasibility
    EdfQueue queue;
    std::unique_ptr<Policy> policy;
    std::vector<int32_t> workers;  // live workers serving it, ascending
    Nanos wake_at = 0;
  };
  // Work collected under mu_ and carried out after it is released.
  struct Actions {
    std::vector<std::pair<std::shared_ptr<WorkerConnection>, std::unique_ptr<v1::RouterMessage>>>
        sends;
    std::vector<std::pair<QueryResponder*, absl::Status>> answers;
    std::vector<std::shared_ptr<WorkerConnection>> closes;
    struct Done {
      const std::string* model_name;  // ModelState outlives the Dispatcher's use
      QueryOutcome outcome;
      Nanos latency;
      double accuracy;
      int32_t subnet_id;
    };
    std::vector<Done> done;
  };

  void Run(Actions* a);
  void ScheduleLocked(int32_t model, Nanos now, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleWorkerModelsLocked(int32_t worker, Nanos now, Actions* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DispatchLocked(int32_t model, const Decision& d, Nanos now, Actions* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerLocked(QueryId id, const absl::Status& status, QueryOutcome outcome, Nanos now,
                    Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequeueOrDropLocked(QueryId id, Nanos now, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerGoneLocked(int32_t worker, const absl::Status& why, Nanos now, Actions* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailQueuedLocked(int32_t model, const absl::Status& status, QueryOutcome outcome,
                        Nanos now, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AttachWorkerLocked(int32_t worker, int32_t model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t FindModelLocked(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void TimerLoop();

  const DispatcherOptions options_;
  const Clock* const clock_;
  RouterMetrics* const metrics_;  // may be null

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<ModelState>> models_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int32_t> model_index_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerState> workers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<QueryId, Pending> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int32_t> applications_ ABSL_GUARDED_BY(mu_);
  QueryId next_query_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_batch_id_ ABSL_GUARDED_BY(mu_) = 0;
  DispatcherStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> free_scratch_ ABSL_GUARDED_BY(mu_);
  Nanos earliest_wake_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool timer_stop_ = false;
  bool timer_kick_ = false;  // a policy asked for an earlier wake-up
  std::thread timer_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_DISPATCHER_H_
