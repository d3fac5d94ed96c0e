#ifndef SUPERSERVE_ROUTER_GRPC_WORKER_CHANNEL_H_
#define SUPERSERVE_ROUTER_GRPC_WORKER_CHANNEL_H_

#include <memory>
#include <string>

#include "router/worker_connection.h"
#include "serving/worker_channel.h"
#include "superserve/v1/worker.pb.h"

namespace superserve {

// The serving core's WorkerChannel over a worker's WorkerLink stream: turns a
// BatchPlan into a v1::Batch (the one place input bytes are copied, outside
// the core's lock), the registration into a RegisterAck, and placement's
// loads and unloads into LoadModel / UnloadModel.
class GrpcWorkerChannel final : public WorkerChannel {
 public:
  explicit GrpcWorkerChannel(std::shared_ptr<WorkerConnection> connection)
      : connection_(std::move(connection)) {}

  void OnRegistered(const std::string& assigned_name, Nanos heartbeat_interval) override;
  void Send(BatchPlan batch) override;
  // Placement: LoadModel (from_repository: the worker loads a model of its
  // own repository and answers ModelLoaded) and UnloadModel.
  void Load(const std::string& model, Nanos expected) override;
  void Unload(const std::string& model) override;
  void Close(const absl::Status& why) override { connection_->Close(why); }

  // The wire message for `batch` (exposed for tests).
  static std::unique_ptr<v1::RouterMessage> Encode(const BatchPlan& batch);

 private:
  const std::shared_ptr<WorkerConnection> connection_;
};

// A worker's BatchResult as the serving core reads it. Output tensors are
// moved out of `result`. An out-of-range error code becomes INTERNAL.
BatchOutcome DecodeBatchResult(v1::BatchResult* result);

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_GRPC_WORKER_CHANNEL_H_
