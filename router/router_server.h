#ifndef SUPERSERVE_ROUTER_ROUTER_SERVER_H_
#define SUPERSERVE_ROUTER_ROUTER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/time.h"
#include "router/dispatcher.h"

namespace grpc {
class Server;
}

namespace superserve {

class AdminService;
class InferenceService;
class OpenInferenceService;
class RouterMetrics;
class WorkerLinkService;

struct RouterServerOptions {
  std::string listen = "127.0.0.1:0";           // gRPC; port 0 picks a free port
  std::string metrics_listen = "127.0.0.1:0";   // Prometheus text; empty = off
  std::string model_repo;                       // every <repo>/<model>/profile.json is served
  Nanos default_slo = Millis(100);              // when a client sets no deadline
  std::string admin_token;                      // empty = Admin calls are PERMISSION_DENIED
  DispatcherOptions dispatcher;
};

// The router process in one object: loads the model repository, runs the
// Inference, Open Inference Protocol (inference.GRPCInferenceService),
// WorkerLink and Admin services plus grpc.health.v1 and server
// reflection on one gRPC server (callback API), and the metrics endpoint.
class RouterServer {
 public:
  explicit RouterServer(RouterServerOptions options);
  ~RouterServer();

  absl::Status Start();
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  Dispatcher* dispatcher() { return dispatcher_.get(); }
  RouterMetrics* metrics() { return metrics_.get(); }
  // Graceful first half of a shutdown: health NOT_SERVING, new queries
  // UNAVAILABLE, what is queued served; returns when nothing is pending or
  // after `timeout` (false: some queries were still pending).
  bool Drain(Nanos timeout);
  // Answers what is pending, closes worker streams, stops the server.
  void Shutdown();
  void Wait();

 private:
  RouterServerOptions options_;
  std::unique_ptr<RouterMetrics> metrics_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<InferenceService> inference_;
  std::unique_ptr<OpenInferenceService> open_inference_;  // KServe v2 / OIP
  std::unique_ptr<WorkerLinkService> worker_link_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  int metrics_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_ROUTER_SERVER_H_
