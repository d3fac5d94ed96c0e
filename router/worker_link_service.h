#ifndef SUPERSERVE_ROUTER_WORKER_LINK_SERVICE_H_
#define SUPERSERVE_ROUTER_WORKER_LINK_SERVICE_H_

#include <string>

#include "router/dispatcher.h"
#include "superserve/v1/worker.grpc.pb.h"

namespace superserve {

// WorkerLink.Connect: one bidi stream per worker. The first message must be
// RegisterWorker; then heartbeats and batch results flow up while batches
// flow down. A closed or broken stream tells the Dispatcher the worker is gone.
//
// With a non-empty `fleet_token`, a Connect whose metadata lacks it (or
// carries another) is finished UNAUTHENTICATED before anything is read:
// nothing of the caller's is registered.
class WorkerLinkService final : public v1::WorkerLink::CallbackService {
 public:
  WorkerLinkService(Dispatcher* dispatcher, std::string fleet_token)
      : dispatcher_(dispatcher), fleet_token_(std::move(fleet_token)) {}

  grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  Dispatcher* const dispatcher_;
  const std::string fleet_token_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_WORKER_LINK_SERVICE_H_
