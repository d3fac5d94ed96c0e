#ifndef SUPERSERVE_ROUTER_DISPATCHER_H_
#define SUPERSERVE_ROUTER_DISPATCHER_H_

#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/model_digest.h"
#include "common/model_profile.h"
#include "google/protobuf/message.h"
#include "policies/policy_factory.h"
#include "router/model_lifecycle.h"
#include "router/query_responder.h"
#include "router/router_metrics.h"
#include "router/worker_connection.h"
#include "serving/serving_core.h"
#include "superserve/v1/admin.pb.h"
#include "superserve/v1/worker.pb.h"

namespace superserve {

struct DispatcherOptions {
  std::string policy = PolicySpec().name;  // the default policy
  // The policy of dynamic models (a profile with a `dynamic` block): one of
  // DynamicPolicyNames().
  std::string dynamic_policy = "orloj";
  // Per-model overrides of the two above (model name -> policy name).
  std::map<std::string, std::string> model_policies;
  PolicyConfig policy_config;
  ServingOptions serving;
  // Run a thread that calls the core's Tick (wake-ups, sweeps, liveness).
  // Off in unit tests, which call Tick() on a simulated clock.
  bool run_timer_thread = true;
};

// Drops the fields of `message` (not of its submessages) this router does
// not know: a newer client's, or padding. Nothing reads them; a queued query
// would hold them (a bound of --max_queue x input bytes becomes --max_queue x
// the message limit), and an input's would go to the worker.
void DropUnknownFields(google::protobuf::Message* message);

// Counters for tests and shutdown logs.
using DispatcherStats = ServingStats;

// The router's side of the serving core (serving/ServingCore): turns gRPC
// messages into core calls and back. A client query's input is moved (the
// front ends own the requests they parse; TakeInput) or else copied into a
// shared payload before the core is entered, and the
// core's batches are encoded onto worker streams after it releases its lock,
// so no tensor bytes are copied under a lock every model and worker shares.
// Every scheduling decision and every answer rule lives in serving/ and
// policies/: the simulator runs the same code.
class Dispatcher {
 public:
  Dispatcher(DispatcherOptions options, const Clock* clock, RouterMetrics* metrics);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // --- models. Every source (the start-up repository, the Admin service,
  // the repository poller, a version switch) goes through lifecycle()
  // (router/model_lifecycle.h).
  ModelLifecycle& lifecycle() { return lifecycle_; }
  // A validated profile served at once (ModelLifecycle::AddServing).
  // `digest` (optional): the version of the router's copy; a worker that
  // registers the model with other digests is refused (RegisterWorker).
  // `version` > 0: the manifest's version, recorded (ModelVersions) so that a
  // newer one can be registered beside it.
  absl::Status AddModel(const ModelProfile& profile, const ModelDigest* digest = nullptr,
                        uint32_t version = 0) {
    return lifecycle_.AddServing(profile, digest, version);
  }
  // At once, without a drain: what is queued or in flight is answered
  // UNAVAILABLE (a drain is ModelLifecycle::Unregister).
  absl::Status RemoveModel(const std::string& name);
  // The policy a model gets: its --model_policy override, else the dynamic
  // policy for a dynamic model, else the default policy.
  std::string PolicyNameFor(const ModelProfile& profile) const;
  // The models served: one loading, draining or unloading
  // (ModelLifecycle) is not listed.
  std::vector<v1::ModelInfo> ListModels() const;
  // The same with the input shape and classes (the Open Inference Protocol's
  // metadata).
  std::vector<ModelSummary> ModelSummaries() const;
  // A served model as a client addresses it: by its name and manifest
  // version (0 = the current one), resolved as queries are (a later version
  // is served under an internal name, "emu@2"). The summary carries the
  // manifest version. NOT_FOUND naming the served models and versions when
  // there is no such model or version.
  absl::StatusOr<ModelSummary> FindModel(const std::string& name, uint32_t version) const;

  // --- client queries. Always answers, now or later. `deadline` is absolute
  // on the dispatcher's clock. The query must not be touched by the caller
  // after this returns: it may already be answered.
  void Submit(QueryResponder* query, Nanos deadline);
  // The client gave up; see ServingCore::OnCancelled.
  void OnCancelled(QueryResponder* query) { core_.OnCancelled(query); }

  // --- workers. RegisterWorker sends the RegisterAck itself (before any
  // batch) and returns the worker's id. A model version whose digests differ
  // from the router's copy is FAILED_PRECONDITION naming both; a worker that
  // sends no version for a model is accepted (a warning is logged).
  absl::StatusOr<int32_t> RegisterWorker(const v1::RegisterWorker& hello,
                                         std::shared_ptr<WorkerConnection> connection);
  void OnHeartbeat(int32_t worker) { core_.OnHeartbeat(worker); }
  // Output tensors are moved out of `result`.
  void OnBatchResult(int32_t worker, v1::BatchResult* result);
  void OnWorkerGone(int32_t worker, const absl::Status& why);
  // A hot registration's load (the lifecycle's) or placement's
  // (ServingCore::OnModelLoaded, with the footprint the worker measured).
  void OnModelLoaded(int32_t worker, const v1::ModelLoaded& loaded);
  // The largest footprint a worker may report (1 PiB); beyond it, or
  // negative, the report's figure is ignored.
  static constexpr int64_t kMaxFootprintBytes = int64_t{1} << 50;

  // See ServingCore::Tick. Without the timer thread the caller ticks, at
  // next_tick() at the latest; one caller at a time. Returns next_tick().
  Nanos Tick();
  Nanos next_tick() {
    std::lock_guard<std::mutex> lock(timer_mu_);
    return timer_next_;
  }

  // Stops accepting queries and waits, at most `timeout`, until every
  // accepted one is answered; true when none is left. Queued queries are
  // still scheduled and served within their deadlines meanwhile.
  bool Drain(Nanos timeout);
  // Answers every pending query UNAVAILABLE and stops the timer thread.
  void Shutdown();

  DispatcherStats Stats() const { return core_.Stats(); }
  const Clock* clock() const { return core_.clock(); }

 private:
  void RequestTick(Nanos t);
  void TimerLoop();

  // Serves `profile` in the core under profile.model (the lifecycle's add).
  absl::Status ServeInCore(const ModelProfile& profile, const ModelDigest* digest);
  // Empty digests mean "nothing to compare".
  absl::Status CheckModelVersions(const v1::RegisterWorker& hello);

  const DispatcherOptions options_;
  RouterMetrics* const metrics_;  // may be null; not owned
  ServingCore core_;
  ModelLifecycle lifecycle_;

  std::mutex digests_mu_;
  absl::flat_hash_map<std::string, ModelDigest> digests_;  // by model name

  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  Nanos timer_next_;  // when Tick is due next
  // The earliest tick the core asked for (RequestTick) since the running
  // Tick began: the core's answer was decided before such a request, and
  // publishing it alone would drop the request.
  Nanos requested_during_tick_ = std::numeric_limits<Nanos>::max();
  bool timer_stop_ = false;
  std::thread timer_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_DISPATCHER_H_
