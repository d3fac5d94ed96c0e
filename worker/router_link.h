#ifndef SUPERSERVE_WORKER_ROUTER_LINK_H_
#define SUPERSERVE_WORKER_ROUTER_LINK_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/model_repository.h"
#include "common/time.h"
#include "superserve/v1/worker.grpc.pb.h"
#include "worker/executor.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace superserve {

struct RouterLinkOptions {
  std::string router;       // host:port
  std::string name;         // reported worker id (the router makes it unique)
  int32_t intra_op_threads = 1;
  int32_t channel_tag = 0;  // distinct tags get distinct TCP connections
  // The first registration must succeed within this (the router may start
  // after the worker); <= 0 waits forever. Run() fails when it passes.
  Nanos connect_timeout = Seconds(30);
  // Once registered, a stream that ends (router gone, connection broken, or
  // the router closed it, e.g. after declaring this worker dead) is dialled
  // again with backoff, forever, until Stop(). false: Run() returns instead.
  bool reconnect = true;
  // Delays between attempts (to connect, and to register) grow from
  // `reconnect_initial_backoff` by 2x per failed attempt up to
  // `reconnect_max_backoff`, each drawn from [0.8, 1] of that
  // (worker/backoff.h); they start over after every successful registration.
  Nanos reconnect_initial_backoff = Millis(100);
  Nanos reconnect_max_backoff = Seconds(2);
  // One attempt's bound on the connection handshake and on the wait for the
  // router's registration ack (a router that accepts but never answers).
  Nanos attempt_timeout = Seconds(5);
  // Sent as call metadata on Connect (common/secret.h); empty = none.
  std::string fleet_token;
  // PEM roots to verify a TLS router (its --worker_tls); empty = plaintext.
  std::string tls_ca_pem;
  // Sent in RegisterWorker: the versions of `models` (common/model_digest.h).
  std::vector<v1::ModelVersion> versions;
  // gRPC keepalive: with no frame from the router for this long, ping it,
  // and close the connection when the ping is not answered within
  // `keepalive_timeout`. A path that silently stops forwarding (partition,
  // no RST) then ends the stream within about their sum, and the link
  // reconnects, instead of waiting on TCP's retransmission timeout
  // (minutes). <= 0 = gRPC's default (no keepalive).
  Nanos keepalive = Seconds(1);
  // Longer than the router's liveness window (heartbeat interval x missed
  // heartbeats): within it the router still counts this worker alive, and
  // dropping the connection earlier loses the batches in flight for
  // nothing (a 1-s watchdog cut workers on loaded hosts; docs/faults.md).
  Nanos keepalive_timeout = Seconds(20);
  // Where models registered at run time (LoadModel) are written, one
  // folder per model; empty = a fresh folder under the system's temporary
  // directory, removed with the link.
  std::string package_dir;
  // Bytes of model memory (--memory_budget_mb; placement, docs/engine.md).
  // 0 = unlimited: the models given to the link are loaded on the executor
  // already and stay. > 0: they are this worker's repository, none loaded;
  // the router's LoadModel (from_repository) and UnloadModel load and free
  // them, and a load whose measured footprint would take the repository
  // models' sum past the budget is refused (unloaded again) with the figure.
  // A hot-registered package is then stored, not loaded: it joins the
  // repository until unregistered (an eviction keeps its files).
  int64_t memory_budget = 0;
  // Tests and benchmarks: wait this long before starting each batch (a
  // worker delayed on purpose). The router's action windows then make the
  // worker refuse the batches it starts too late.
  Nanos start_delay = 0;
};

// One worker's link to the router (SuperServe Fig. 7 steps 3-6, worker
// side): dials, registers its models, heartbeats, and runs each Batch that
// arrives on `executor` in arrival order, replying with per-query outputs and
// the measured execution time. A bad batch yields an error result; the link
// stays up. When the stream ends, the link dials again with capped
// exponential backoff and registers anew (RouterLinkOptions::reconnect).
//
// Models registered at run time arrive as LoadModel (the package's files):
// a loader thread writes them under package_dir, loads them with the same
// loader as the start-up repository, checks their digests against the
// router's, and loads them on the executor while it serves; the executor
// thread then adds the model to what it serves and answers ModelLoaded. An
// UnloadModel (after the router drained the model) frees it, in order with
// the batches. A later session registers the hot-loaded models too.
//
// With a memory budget (placement) the link starts each session with none
// of its repository's models loaded; a LoadModel with from_repository loads
// one on the loader thread once the UnloadModels received before it are
// done (the router evicts before it loads), and ModelLoaded reports the
// footprint the executor measured (Executor::ResidentBytes). A hot
// package (LoadModel with files) is written and validated but stored, not
// loaded: it answers ModelLoaded and joins the repository, to be loaded
// and evicted like the rest; an UnloadModel without keep_package (the
// model unregistered) deletes it.
//
// Each registration is one session with its own stream: batches still queued
// locally when a stream ends are dropped (the router re-queues or answers
// their queries), a batch already executing finishes first, and its result
// goes to the old stream or nowhere, never to the next one.
class RouterLink {
 public:
  RouterLink(RouterLinkOptions options, Executor* executor, std::vector<ModelEntry> models);
  ~RouterLink();

  // Blocks until Stop() (then OK), or until the link gives up: the first
  // registration did not succeed within connect_timeout, or (reconnect =
  // false) the stream ended or the router refused the registration.
  absl::Status Run();
  // Thread-safe; may be called from a signal-handling thread. Interrupts a
  // backoff sleep, a connection attempt or a session at once.
  void Stop();

  int64_t batches_run() const { return batches_run_.load(); }
  // Successful registrations after the first one.
  int64_t reconnects() const { return reconnects_.load(); }
  // True while registered on a live stream.
  bool registered() const { return registered_.load(); }

 private:
  // A model the loader thread loaded (or failed to), for the executor
  // thread to install and report.
  struct LoadedModel {
    std::string model;
    std::string error;  // empty: loaded on the executor
    ModelEntry entry;
    v1::ModelVersion version;
    Nanos load_time = 0;
    int64_t memory_bytes = 0;      // measured footprint (0: not known)
    bool from_repository = false;  // placement's load, not a hot package
    bool stored = false;  // a hot package a budgeted worker stored, not loaded
    int64_t model_unloads_before = 0;  // see PendingLoad
    // Latencies measured here (a profile without them), by subnet id.
    std::map<int32_t, std::vector<double>> measured;
  };
  // What the executor thread runs, in order: a batch or an UnloadModel
  // (`message`), or a model the loader thread loaded (`loaded`).
  struct ReceivedBatch {
    std::unique_ptr<v1::RouterMessage> message;
    Nanos received = 0;
    std::unique_ptr<LoadedModel> loaded;
  };
  // How one session (dial, register, serve until the stream ends) ended.
  struct SessionEnd {
    bool registered = false;  // it registered, then the stream ended
    bool refused = false;     // connected, but the router did not register it
    bool lasting = false;     // refused for a reason retrying does not change
    bool timed_out = false;   // the connection attempt ran into its deadline
    absl::Status status;      // why it ended (OK when stopped)
  };
  // One session; the connection attempt gives up at `connect_deadline`
  // (RealClock time). `on_registered` runs once the router acknowledged the
  // registration (with the id it assigned), before any batch is served.
  SessionEnd RunSession(Nanos connect_deadline,
                        const std::function<void(const std::string&)>& on_registered);
  // Waits for the channel to be READY: false on the first failed attempt, at
  // the deadline or on Stop(); `why` says which.
  bool WaitReady(grpc::Channel* channel, Nanos deadline, std::string* why);
  // After WaitReady's "connection failed": the same with gRPC's reason, and
  // a hint at TLS when the reason is not a refused connection.
  std::string ConnectionFailure(const std::shared_ptr<grpc::Channel>& channel);
  // Sleeps `d` unless Stop() comes first; true when stopped.
  bool SleepUnlessStopped(Nanos d);
  void ExecuteLoop();
  void LoadLoop();
  // Writes, validates and loads one LoadModel (on the loader thread).
  std::unique_ptr<LoadedModel> LoadPackage(const v1::LoadModel& load);
  // Placement: loads one model of the repository (on the loader thread).
  std::unique_ptr<LoadedModel> LoadFromRepository(const std::string& model);
  // A budgeted worker's new session: frees every repository model (the
  // router counts this worker empty at registration).
  void UnloadRepositoryModels();
  // The start-up repository or a stored hot package.
  bool InRepository(const std::string& model) const;
  // The executor thread's part: serve the model (store it), or free it;
  // `keep_package`: a stored hot package stays stored (placement evicts).
  void Install(LoadedModel* loaded);
  void Unload(const std::string& model, bool keep_package = false);
  // The folder hot-loaded packages go to (created on first use).
  absl::StatusOr<std::string> PackageRoot();
  // The models served now: a snapshot, unchanged by a later Install or
  // Unload.
  std::shared_ptr<const std::vector<ModelEntry>> Models() const;
  void HeartbeatLoop(Nanos interval);
  bool Write(const v1::WorkerMessage& m);

  const RouterLinkOptions options_;
  Executor* const executor_;
  // The start-up models, then the hot-loaded ones, and where those are
  // written: changed by the executor thread (Install, Unload), read by the
  // loader thread (LoadPackage) while it runs, and by RunSession. The model
  // list is replaced, never changed in place, so that a batch runs on a
  // snapshot (Models()) without holding the lock.
  mutable absl::Mutex models_mu_;
  std::shared_ptr<const std::vector<ModelEntry>> models_ ABSL_GUARDED_BY(models_mu_);
  // Of the hot-loaded models.
  std::vector<v1::ModelVersion> hot_versions_ ABSL_GUARDED_BY(models_mu_);
  // With a memory budget: the models this worker may load (never changed),
  // and the measured footprints of those loaded now.
  const std::vector<ModelEntry> repository_;
  std::map<std::string, int64_t> footprints_ ABSL_GUARDED_BY(models_mu_);
  // With a memory budget: the hot packages stored (by the name batches
  // use), loadable like repository_'s models; their versions are in
  // hot_versions_.
  std::map<std::string, ModelEntry> stored_ ABSL_GUARDED_BY(models_mu_);
  std::string package_root_ ABSL_GUARDED_BY(models_mu_);  // see PackageRoot()
  bool owns_package_root_ ABSL_GUARDED_BY(models_mu_) = false;

  // The current session's call; replaced only between sessions, when no
  // thread of the previous one is left.
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::RouterMessage>> stream_;
  std::mutex write_mu_;  // gRPC allows one writer at a time

  std::mutex mu_;
  // Separate condition variables: a batch arrival wakes only the executor
  // thread (one shared variable woke the heartbeat thread on every batch too).
  std::condition_variable batch_cv_;      // executor: batches_ non-empty or stopping_
  std::condition_variable heartbeat_cv_;  // heartbeat: stopping_
  std::condition_variable stop_cv_;       // backoff sleep, registration watchdog
  std::condition_variable prepared_cv_;   // session: prepared_ or stopping_
  std::deque<ReceivedBatch> batches_;
  // loader: loads_ non-empty, an unload done, or stopping_
  std::condition_variable load_cv_;
  struct PendingLoad {
    std::unique_ptr<v1::RouterMessage> message;
    int64_t unloads_before = 0;  // UnloadModels received before it (this session)
    int64_t model_unloads_before = 0;  // of those, for its model
  };
  std::deque<PendingLoad> loads_;
  int64_t unloads_received_ = 0;  // this session's, by the reading thread
  int64_t unloads_done_ = 0;      // of those, carried out by the executor thread
  // Per model, this session's UnloadModels received (reading thread, under
  // mu_) and carried out (executor thread only): a placement load overtaken
  // by an unload of its model (the model removed while loading) is freed
  // instead of installed.
  std::map<std::string, int64_t> model_unloads_received_;
  std::map<std::string, int64_t> model_unloads_done_;
  bool stopping_ = false;  // this session is over, or Stop()
  bool acked_ = false;     // this session's wait for the registration ack is over
  bool prepared_ = false;  // this session's executor thread ran PrepareThread
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> registered_{false};
  std::atomic<int64_t> batches_run_{0};
  std::atomic<int64_t> reconnects_{0};
};

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_ROUTER_LINK_H_
