#ifndef SUPERSERVE_WORKER_ROUTER_LINK_H_
#define SUPERSERVE_WORKER_ROUTER_LINK_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model_repository.h"
#include "common/time.h"
#include "superserve/v1/worker.grpc.pb.h"
#include "worker/executor.h"

namespace grpc {
class ClientContext;
}

namespace superserve {

struct RouterLinkOptions {
  std::string router;       // host:port
  std::string name;         // reported worker id (the router makes it unique)
  int32_t intra_op_threads = 1;
  int32_t channel_tag = 0;  // distinct tags get distinct TCP connections
  Nanos connect_timeout = Seconds(30);
};

// One worker's session with the router (SuperServe Fig. 7 steps 3-6, worker
// side): dials, registers its models, heartbeats, and runs each Batch that
// arrives on `executor` in arrival order, replying with per-query outputs and
// the measured execution time. A bad batch yields an error result; the link
// stays up. Run() returns when the stream ends.
class RouterLink {
 public:
  RouterLink(RouterLinkOptions options, Executor* executor, std::vector<ModelEntry> models);
  ~RouterLink();

  // Blocks until the router closes the stream, the connection breaks, or
  // Stop() is called. OK after Stop().
  absl::Status Run();
  // Thread-safe; may be called from a signal-handling thread.
  void Stop();

  int64_t batches_run() const { return batches_run_.load(); }

 private:
  struct ReceivedBatch {
    std::unique_ptr<v1::RouterMessage> message;
    Nanos received = 0;
  };
  void ExecuteLoop();
  void HeartbeatLoop(Nanos interval);
  bool Write(const v1::WorkerMessage& m);

  const RouterLinkOptions options_;
  Executor* const executor_;
  const std::vector<ModelEntry> models_;

  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::RouterMessage>> stream_;
  std::mutex write_mu_;  // gRPC allows one writer at a time

  std::mutex mu_;
  // Two condition variables: a batch arrival wakes only the executor thread
  // (one shared variable woke the heartbeat thread on every batch too).
  std::condition_variable batch_cv_;      // executor: batches_ non-empty or stopping_
  std::condition_variable heartbeat_cv_;  // heartbeat: stopping_
  std::deque<ReceivedBatch> batches_;
  bool stopping_ = false;
  std::atomic<bool> stop_requested_{false};
  std::atomic<int64_t> batches_run_{0};
};

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_ROUTER_LINK_H_
