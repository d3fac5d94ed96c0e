#ifndef SUPERSERVE_ROUTER_MODEL_LIFECYCLE_H_
#define SUPERSERVE_ROUTER_MODEL_LIFECYCLE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_digest.h"
#include "common/model_profile.h"
#include "common/model_repository.h"
#include "common/time.h"
#include "router/hot_models.h"
#include "router/model_versions.h"
#include "router/worker_connection.h"
#include "superserve/v1/worker.pb.h"

namespace superserve {

// The one path a model version takes through the router, whatever its
// source (the start-up repository, superserve-admin, the repository poller;
// a version switch is a registration of a higher version):
//
//   validate -> kLoading (HotModels: on workers) -> kServing -> kDraining
//            -> kUnloading -> gone
//
// A start-up model whose workers declare it enters at kServing. Events move
// a version on: a worker loaded it or failed (HotModels), the serving core
// reports it drained (ServingCore::CloseModel's on_drained) or its drain
// timed out, it was removed and unloaded. Each transition is decided under
// the lock and acted on after it: a worker's load by the thread reporting
// it, a drain by the unregister waiting for it (the core's event may come
// from within any call into the core, so it only decides); a caller that
// waits for an outcome (Register, Unregister) waits for an event, never
// polls. Thread-safe.
class ModelLifecycle {
 public:
  enum class State { kLoading, kServing, kDraining, kUnloading };
  static const char* StateName(State s);

  // What the lifecycle asks of the serving side (the Dispatcher and its
  // ServingCore; a recorder in tests). None is called under the lock but
  // `add` for a worker's load: a version serves only if still loading.
  struct Serving {
    // Serves `profile` under profile.model (policy, core, digests).
    std::function<absl::Status(const ModelProfile& profile, const ModelDigest* digest)> add;
    // No new queries; `on_drained` runs once when nothing is left
    // (ServingCore::CloseModel). NOT_FOUND when not served.
    std::function<absl::Status(const std::string& model, std::function<void()> on_drained)> close;
    // Removes the model (what is left is answered UNAVAILABLE).
    std::function<absl::Status(const std::string& model)> remove;
    // The worker serves the model from now on (ServingCore::AttachWorker).
    std::function<absl::Status(int32_t worker, const std::string& model)> attach;
  };
  explicit ModelLifecycle(Serving serving);

  // --- sources
  // The start-up repository: a model the workers declare is served at once
  // (version recorded); one whose profile leaves latency_us out is
  // registered as superserve-admin would, without the wait.
  absl::Status AddFromRepository(const ModelEntry& entry);
  // A validated profile served at once (kServing); `version` > 0 is recorded
  // (ModelVersions) so that a newer one can be registered beside it.
  absl::Status AddServing(const ModelProfile& profile, const ModelDigest* digest, uint32_t version);
  // superserve-admin register, the poller, a version switch: validates the
  // package in `path` (a directory or a .tar of one, common/tar_package.h;
  // `expected_name`, if not empty, must be its model), then has the workers
  // load it (HotModels::Register, which says what the outcome means). A
  // package of a served model with a higher manifest version is loaded
  // beside it and becomes current once a worker has it: queries already
  // accepted finish on the old version, later unpinned ones go to the new.
  HotModels::Outcome Register(const std::string& path, const std::string& expected_name,
                              Nanos timeout);
  // The version decision of every source: `version` of `name` may load
  // when it is newer than each version of the name held here (serving,
  // loading, draining, unloading), else ALREADY_EXISTS. Returns the
  // internal name it is served under (ModelVersions::InternalName: its own
  // when no other version is held).
  absl::StatusOr<std::string> DecideVersion(const std::string& name, uint32_t version) const;
  // superserve-admin unregister, the poller: every version (`version` 0) or
  // one. Each served one is drained: new queries are refused, queued and
  // in-flight ones are served, for at most `timeout` (what is left then is
  // answered UNAVAILABLE); then it is removed and the workers free it. One
  // still loading is unloaded, never served. Returns once that is done.
  absl::Status Unregister(const std::string& name, uint32_t version, Nanos timeout);

  // --- events from the workers' streams (forwarded to HotModels)
  // A worker with a memory budget (`stores_packages`) declares the hot
  // packages it stored: one no longer served here (unregistered while the
  // worker was away) is deleted there (UnloadModel without keep_package, as
  // unregistration does; a repository model's is a no-op there).
  void OnWorkerRegistered(int32_t worker, std::string name,
                          const std::vector<std::string>& declared,
                          std::shared_ptr<WorkerConnection> connection,
                          bool stores_packages = false);
  void OnWorkerGone(int32_t worker);
  void OnModelLoaded(int32_t worker, const v1::ModelLoaded& loaded);
  // Wakes every Register wait with UNAVAILABLE (the router shuts down).
  void Shutdown();

  // --- reads
  // The state of the version served under `internal`; nullopt once gone.
  std::optional<State> StateOf(const std::string& internal) const;
  // Resolves queries' versions (the Dispatcher's Submit, FindModel).
  const ModelVersions& versions() const { return versions_; }

 private:
  // The core's event: `internal` drained (it is marked unloading).
  void OnDrained(const std::string& internal);
  // If `close` (the caller set it draining): closes `internal`, waits for
  // the drained event (at most `timeout`), removes and unloads it. Else
  // waits until the unregister that closed it has.
  void Drain(const std::string& internal, bool close, Nanos timeout);
  absl::StatusOr<std::string> DecideVersionLocked(const std::string& name,
                                                  uint32_t version) const;
  // Under mu_: sets the state, or forgets the version (nullopt).
  void SetLocked(const std::string& internal, std::optional<State> state);

  const Serving serving_;
  ModelVersions versions_;
  HotModels hot_;

  mutable std::mutex mu_;
  std::condition_variable changed_;      // a state changed
  struct Entry {
    State state;
    std::string name;  // the package's model
    uint32_t version = 0;
  };
  std::map<std::string, Entry> states_;  // by internal name
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_MODEL_LIFECYCLE_H_
