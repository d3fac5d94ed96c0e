#ifndef SUPERSERVE_ROUTER_ROUTER_SERVER_H_
#define SUPERSERVE_ROUTER_ROUTER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/time.h"
#include "router/dispatcher.h"

namespace grpc {
class CallbackGenericService;
class Server;
class ServerCredentials;
}

namespace superserve {

class AdminService;
class InferenceService;
class OpenInferenceService;
class RouterMetrics;
class WorkerLinkService;
class RepositoryPoller;

struct RouterServerOptions {
  // The three addresses are HOST:PORT (an IPv6 host in brackets), port
  // 0..65535, 0 picking a free port; the gRPC ones may be unix:PATH too. No
  // two may name the same non-zero port (CheckRouterServerOptions).
  std::string listen = "127.0.0.1:0";           // Inference + Admin
  // WorkerLink, on a server of its own (never the client port). A
  // non-loopback address needs a fleet token (or allow_unauthenticated_workers).
  std::string worker_listen = "127.0.0.1:0";
  std::string metrics_listen = "127.0.0.1:0";   // Prometheus text; empty = off
  std::string model_repo;                       // every <repo>/<model>/profile.json is served
  // Re-scan model_repo this often and register/unregister what changed
  // (router/repository_poller.h; Triton's poll mode). 0 = off.
  Nanos repository_poll = 0;
  Nanos default_slo = Millis(100);              // when a client sets no deadline
  std::string admin_token;                      // empty = Admin off (calls UNIMPLEMENTED)
  // Workers must send it (metadata "superserve-fleet-token"); empty = none asked.
  std::string fleet_token;
  bool allow_unauthenticated_workers = false;
  // TLS on the client port (PEM files). Both or neither of cert and key;
  // with client_ca_file, clients must present a certificate it signed.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  bool worker_tls = false;  // the worker port uses the same certificate (needs one)
  int32_t max_message_bytes = 64 << 20;  // receive and send, per message
  size_t max_stream_unsent_answers = 4096;  // see InferenceService
  bool inline_call_completion = true;       // see InferenceService
  // Calls (HTTP/2 streams) one client connection may have open at once on
  // the client port; more wait in the client. 0 = gRPC's default (no limit).
  int32_t max_concurrent_streams = 16384;
  DispatcherOptions dispatcher;
};

// What Start() refuses before it binds anything, each with a message naming
// the flag: a listen address that is not HOST:PORT with a port in 0..65535;
// two of the router's servers on one address; worker_tls without a
// certificate and key.
absl::Status CheckRouterServerOptions(const RouterServerOptions& options);

// The client port's credentials: TLS when options name a certificate.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const RouterServerOptions& options);

// The router process in one object: loads the model repository, runs the
// Inference, Open Inference Protocol (inference.GRPCInferenceService) and
// Admin services plus grpc.health.v1 and server reflection on the client
// server, WorkerLink on a second server (its own address), both with gRPC's
// callback API, and the metrics endpoint. docs/security.md.
class RouterServer {
 public:
  explicit RouterServer(RouterServerOptions options);
  ~RouterServer();

  absl::Status Start();
  int port() const { return port_; }
  int worker_port() const { return worker_port_; }
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
  std::unique_ptr<RepositoryPoller> poller_;  // null unless repository_poll > 0
  // Answer calls of the other port's services with a hint (router_server.cc).
  // Declared before the servers: a service must outlive its server.
  std::unique_ptr<grpc::CallbackGenericService> client_port_hint_;
  std::unique_ptr<grpc::CallbackGenericService> worker_port_hint_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> worker_server_;
  int port_ = 0;
  int worker_port_ = 0;
  int metrics_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_ROUTER_SERVER_H_
