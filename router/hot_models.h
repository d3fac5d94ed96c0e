#ifndef SUPERSERVE_ROUTER_HOT_MODELS_H_
#define SUPERSERVE_ROUTER_HOT_MODELS_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model_digest.h"
#include "common/model_repository.h"
#include "common/time.h"
#include "router/worker_connection.h"
#include "superserve/v1/worker.pb.h"

namespace superserve {

// Models registered at run time (Admin.RegisterModel; docs/packages.md):
// the package's files go to every live worker over its stream (LoadModel)
// and to every worker that registers later without the model; the model
// becomes visible to clients when the first worker reports it ready
// (ModelLoaded), and each further worker serves it once it reports ready.
// Unload tells the workers to free it (UnloadModel). A worker with a memory
// budget stores the package instead of loading it and reports it ready
// (ModelLoaded.stored): placement loads it there on demand. Thread-safe. The hooks
// run under its lock, so that "visible" and "who serves" change together;
// they take the lifecycle's and the serving core's locks, never this one.
//
// The "load on workers" step of ModelLifecycle, which owns each version's
// state and decides whether a load serves (its add hook refuses a version no
// longer loading). What stays here is the step's own bookkeeping, per
// worker and per package: the LoadModel sent to workers that join later,
// who was asked, who is ready or failed and why (Register's outcome, which
// superserve-admin prints), and the wait for it. None of it outlives the
// version's state there (Unload forgets it).
class HotModels {
 public:
  struct Hooks {
    // Makes the model visible to clients: `profile` is served under its
    // model name (the internal one), as `version` of `name`.
    std::function<absl::Status(const ModelProfile& profile, const ModelDigest&,
                               const std::string& name, uint32_t version)>
        add_model;
    // The worker serves the model from now on (ServingCore::AttachWorker).
    std::function<absl::Status(int32_t worker, const std::string& model)> attach;
  };
  explicit HotModels(Hooks hooks) : hooks_(std::move(hooks)) {}

  // The largest package sent over a worker stream: well under the link's
  // message limit (common/worker_link_limits.h), because every worker's
  // stream holds its own serialized copy while the package is sent.
  static constexpr int64_t kMaxPackageBytes = 60 << 20;

  struct WorkerLoad {
    std::string worker;
    bool ready = false;
    std::string error;  // empty while loading or when ready
    int64_t load_us = 0;
  };
  struct Outcome {
    std::string model;  // the package's model, once read
    absl::Status status;
    bool visible = false;  // a worker loaded it: clients can query it
    std::vector<WorkerLoad> workers;  // those asked, in registration order
  };
  // Reads the package in entry.directory, sends it to every live worker and
  // waits at most `timeout` until one reports it ready (OK, visible: clients
  // can query it), every worker asked failed (FAILED_PRECONDITION naming
  // each worker's reason; the registration is undone), or time runs out
  // (OK, not visible: the registration stands, and the model becomes visible
  // when a worker loads it, a worker that joins later included). With no
  // worker connected it waits, within `timeout`, for one to join and load it
  // (an operator starting the fleet registers before the workers are up).
  // ALREADY_EXISTS if the model is registered here already.
  // `serve_as`: the internal name (ModelVersions) this `version` of the
  // package's model is served and tracked under here.
  Outcome Register(const ModelEntry& entry, const ModelDigest& digest, const std::string& serve_as,
                   uint32_t version, Nanos timeout);
  // Forgets the model (if registered here) and tells every live worker to
  // free it (whether it was hot-loaded or loaded at start-up).
  void Unload(const std::string& model);
  bool Registered(const std::string& model) const;

  // From the Dispatcher, on each worker's stream.
  void OnWorkerRegistered(int32_t worker, std::string name,
                          const std::vector<std::string>& declared,
                          std::shared_ptr<WorkerConnection> connection);
  void OnWorkerGone(int32_t worker);
  void OnModelLoaded(int32_t worker, const v1::ModelLoaded& loaded);
  // Wakes every Register wait with UNAVAILABLE (the router shuts down).
  void Shutdown();

 private:
  struct Model {
    std::string name;  // the package's model
    uint32_t version = 0;
    ModelProfile profile;  // profile.model = the internal name
    ModelDigest digest;
    std::shared_ptr<const v1::RouterMessage> load;  // LoadModel with the files
    std::map<int32_t, WorkerLoad> asked;            // by worker id
    bool visible = false;
  };
  struct Worker {
    std::string name;
    std::shared_ptr<WorkerConnection> connection;
  };
  // Under mu_: a wait is over.
  bool SettledLocked(const std::string& model) const;

  const Hooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable settled_;
  std::map<std::string, Model> models_;
  std::map<int32_t, Worker> workers_;  // live
  bool shut_down_ = false;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_HOT_MODELS_H_
