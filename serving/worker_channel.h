// The core's way to one worker (WorkerChannel): batches, loads and unloads
// out; results come back through ServingCore.
#ifndef SUPERSERVE_SERVING_WORKER_CHANNEL_H_
#define SUPERSERVE_SERVING_WORKER_CHANNEL_H_

#include <string>

#include "absl/status/status.h"
#include "common/time.h"
#include "serving/batch.h"

namespace superserve {

// The core's way to one worker: batches go out through it, their results
// come back through ServingCore::OnBatchResult. The router implements it over
// the worker's gRPC stream (router/grpc_worker_channel.h), the simulator with
// an emulated worker on the simulated clock. The core calls it only outside
// its lock, and for one channel in the order the core decided.
class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // First call on a channel: the worker is registered under this name and
  // should heartbeat this often (0 = no heartbeats expected).
  virtual void OnRegistered(const std::string& assigned_name, Nanos heartbeat_interval) = 0;
  virtual void Send(BatchPlan batch) = 0;
  // Placement (serving/residency.h): load `model` into the worker's memory
  // (the core expects it to take the profile's load time; the worker loads
  // one model at a time, in the order asked) and report it with
  // ServingCore::OnModelLoaded; unload one (the core counts its memory free
  // at once). An eviction never unloads a model with a batch in flight; a
  // removed model's unload may follow batches of it already sent, which the
  // worker finishes first. Only workers registered with a memory budget
  // are asked (the live one: superserve-worker --memory_budget_mb, whose
  // channel sends LoadModel / UnloadModel; router/grpc_worker_channel.h).
  virtual void Load(const std::string& model, Nanos expected) {}
  virtual void Unload(const std::string& model) {}
  // The core gave up on this worker (declared dead, or shutting down).
  virtual void Close(const absl::Status& why) = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_WORKER_CHANNEL_H_
