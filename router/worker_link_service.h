#ifndef SUPERSERVE_ROUTER_WORKER_LINK_SERVICE_H_
#define SUPERSERVE_ROUTER_WORKER_LINK_SERVICE_H_

#include "router/dispatcher.h"
#include "superserve/v1/worker.grpc.pb.h"

namespace superserve {

// WorkerLink.Connect: one bidi stream per worker. The first message must be
// RegisterWorker; then heartbeats and batch results flow up while batches
// flow down. A closed or broken stream tells the Dispatcher the worker is gone.
class WorkerLinkService final : public v1::WorkerLink::CallbackService {
 public:
  explicit WorkerLinkService(Dispatcher* dispatcher) : dispatcher_(dispatcher) {}

  grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  Dispatcher* const dispatcher_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_WORKER_LINK_SERVICE_H_
