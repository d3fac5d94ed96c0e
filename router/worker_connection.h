#ifndef SUPERSERVE_ROUTER_WORKER_CONNECTION_H_
#define SUPERSERVE_ROUTER_WORKER_CONNECTION_H_

#include <memory>

#include "absl/status/status.h"
#include "superserve/v1/worker.pb.h"

namespace superserve {

// The router's end of one worker's stream. The gRPC WorkerLink service
// implements it over a bidi reactor (messages queue up behind the one write
// gRPC allows in flight); unit tests implement it in memory. Thread-safe.
class WorkerConnection {
 public:
  virtual ~WorkerConnection() = default;
  // Queues a message; dropped silently once the connection is closed.
  virtual void Send(std::unique_ptr<v1::RouterMessage> message) = 0;
  // Ends the stream with `why` (e.g. a missed heartbeat).
  virtual void Close(const absl::Status& why) = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_WORKER_CONNECTION_H_
