#include "router/router_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "router/repository_poller.h"
#include "common/model_digest.h"
#include "common/model_repository.h"
#include "router/admin_service.h"
#include "router/inference_service.h"
#include "router/open_inference_service.h"
#include "router/router_metrics.h"
#include "router/worker_link_service.h"

namespace superserve {

RouterServer::RouterServer(RouterServerOptions options) : options_(std::move(options)) {}

RouterServer::~RouterServer() {
  Shutdown();
  // The metrics endpoint outlives the dispatcher (members go in reverse).
  if (metrics_ != nullptr) metrics_->ExportServingTotals(nullptr);
}

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "127.0.0.1:P", "localhost:P", "[::1]:P": reachable from this host only.
bool IsLoopback(const std::string& address) {
  const std::string host = address.substr(0, address.rfind(':'));
  return absl::StartsWith(host, "127.") || host == "localhost" || host == "[::1]" ||
         host == "ipv4:127.0.0.1" || host == "unix";
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const RouterServerOptions& o) {
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key file");
  }
  if (o.tls_cert_file.empty()) {
    if (!o.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("a client CA file needs a TLS certificate and key");
    }
    return grpc::InsecureServerCredentials();
  }
  auto cert = ReadPem(o.tls_cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(o.tls_key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.tls_client_ca_file.empty()) {
    auto ca = ReadPem(o.tls_client_ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

absl::Status RouterServer::Start() {
  // Debian's Abseil checks lock-order cycles on every Mutex::Lock (a debug
  // aid); on the query path that cost ~3-9% of the router's CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (options_.fleet_token.empty()) {
    if (!IsLoopback(options_.worker_listen) && !options_.allow_unauthenticated_workers) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to accept workers on ", options_.worker_listen,
          " without a fleet token: anyone who reaches it could join the fleet and read client "
          "tensors. Pass --fleet_token_file (workers too), or --allow_unauthenticated_workers"));
    }
    SS_LOG(WARNING) << "WORKER LINK UNAUTHENTICATED: no --fleet_token_file; any process that "
                       "can reach "
                    << options_.worker_listen << " can register as a worker (docs/security.md)";
  }
  auto client_creds = ServerCredentialsFor(options_);
  if (!client_creds.ok()) return client_creds.status();
  metrics_ = std::make_unique<RouterMetrics>();
  dispatcher_ = std::make_unique<Dispatcher>(options_.dispatcher, RealClock::Get(), metrics_.get());
  metrics_->ExportServingTotals([d = dispatcher_.get()] { return d->Stats(); });
  // Autoscaling advice at the objective of queries without a deadline.
  RouterMetrics::WorkersNeededOptions advice;
  advice.objective = options_.default_slo;
  metrics_->EnableWorkersNeeded(advice, RealClock::Get());
  if (!options_.model_repo.empty()) {
    auto models = LoadModelRepository(options_.model_repo);
    if (!models.ok()) return models.status();
    if (models->empty()) {
      // An empty repository is useful only to a fleet whose models will be
      // registered at run time; without an admin token none ever could be,
      // and the path is more likely a typo.
      if (options_.admin_token.empty()) {
        return absl::NotFoundError(absl::StrCat("model repository ", options_.model_repo,
                                                " has no <model>/profile.json (and no admin "
                                                "token to register models later)"));
      }
      SS_LOG(WARNING) << "router: model repository " << options_.model_repo
                      << " holds no model; serving none until one is registered "
                         "(superserve-admin register)";
    }
    for (const auto& m : *models) {
      if (!m.profile.latencies_measured) {
        // The registration path (superserve-admin register) without the
        // wait: the first worker to join loads it, measures the latencies
        // and makes it visible.
        auto out = dispatcher_->RegisterPackage(m.directory, m.name, /*timeout=*/0);
        if (!out.status.ok()) return out.status;
        SS_LOG(INFO) << "model " << m.name << ": its profile leaves latency_us out; it serves "
                     << "once a worker has loaded it and measured them";
        continue;
      }
      auto digest = DigestModelDirectory(m.directory);
      if (!digest.ok()) return digest.status();
      const uint32_t version = m.manifest.has_value() ? m.manifest->version : 1;
      if (auto s = dispatcher_->AddModel(m.profile, &*digest, version); !s.ok()) return s;
      metrics_->SetModelProfile(m.profile);
    }
  }
  if (options_.repository_poll > 0 && !options_.model_repo.empty()) {
    Dispatcher* d = dispatcher_.get();
    poller_ = std::make_unique<RepositoryPoller>(
        options_.model_repo,
        RepositoryPoller::Actions{
            // A short wait: the registration stands without a worker, and a
            // worker loading it later makes it visible.
            [d](const std::string& dir, const std::string& name) {
              return d->RegisterPackage(dir, name, Seconds(1)).status;
            },
            [d](const std::string& name) { return d->UnregisterModel(name, 0, Seconds(30)); }});
    if (auto models = LoadModelRepository(options_.model_repo); models.ok()) {
      poller_->Adopt(*models);
    }
    poller_->Start(options_.repository_poll);
    SS_LOG(INFO) << "router: re-scanning " << options_.model_repo << " every "
                 << ToSeconds(options_.repository_poll) << " s (poll mode)";
  }
  inference_ = std::make_unique<InferenceService>(dispatcher_.get(), options_.default_slo,
                                                  options_.max_stream_unsent_answers);
  open_inference_ = std::make_unique<OpenInferenceService>(dispatcher_.get(), options_.default_slo,
                                                           options_.max_stream_unsent_answers);
  worker_link_ = std::make_unique<WorkerLinkService>(dispatcher_.get(), options_.fleet_token);
  admin_ = std::make_unique<AdminService>(dispatcher_.get(), options_.admin_token,
                                          options_.model_repo);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen, *client_creds, &port_);
    builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
    builder.SetMaxSendMessageSize(options_.max_message_bytes);
    if (options_.max_concurrent_streams > 0) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams);
    }
    builder.RegisterService(inference_.get());
    builder.RegisterService(open_inference_.get());
    builder.RegisterService(admin_.get());
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen));
    }
  }
  {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.worker_listen,
                             options_.worker_tls ? *client_creds
                                                 : grpc::InsecureServerCredentials(),
                             &worker_port_);
    // Batches carry many queries' tensors.
    builder.SetMaxReceiveMessageSize(std::max(options_.max_message_bytes, 64 << 20));
    builder.SetMaxSendMessageSize(std::max(options_.max_message_bytes, 64 << 20));
    // Keepalive both ways on the worker link (docs/faults.md, partitioned
    // worker): the router pings a silent connection so that a dead path
    // ends its stream (heartbeats already mark the worker dead within
    // --missed_heartbeats intervals; this frees the connection), and it
    // accepts the workers' own pings (--keepalive_ms, 1 s by default) rather
    // than answering them GOAWAY "too many pings".
    const Nanos hb = options_.dispatcher.serving.heartbeat_interval;
    const int keepalive_ms =
        static_cast<int>(std::max<Nanos>(Seconds(1), 2 * hb) / kNanosPerMilli);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_ms);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 100);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.RegisterService(worker_link_.get());
    worker_server_ = builder.BuildAndStart();
    if (worker_server_ == nullptr || worker_port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for workers on ", options_.worker_listen));
    }
  }
  server_->GetHealthCheckService()->SetServingStatus(true);
  if (!options_.metrics_listen.empty()) {
    auto port = metrics_->Serve(options_.metrics_listen);
    if (!port.ok()) return port.status();
    metrics_port_ = *port;
  }
  return absl::OkStatus();
}

bool RouterServer::Drain(Nanos timeout) {
  if (shut_down_ || server_ == nullptr) return true;
  server_->GetHealthCheckService()->SetServingStatus(false);
  open_inference_->SetServing(false);
  return dispatcher_->Drain(timeout);
}

void RouterServer::Shutdown() {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  if (poller_ != nullptr) poller_->Stop();
  server_->GetHealthCheckService()->SetServingStatus(false);
  open_inference_->SetServing(false);
  dispatcher_->Shutdown();
  // Every accepted query has its answer by now (drained, or answered
  // UNAVAILABLE by the dispatcher): the worker streams carry nothing more and
  // never end on their own, so they are cancelled at once (a 2-s grace here
  // came on top of the client server's and a restart cost ~4 s of downtime,
  // docs/faults.md). Client calls get 0.5 s to flush the answers already
  // written; an InferStream a client keeps open would otherwise hold the
  // whole grace.
  if (worker_server_ != nullptr) worker_server_->Shutdown(std::chrono::system_clock::now());
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
}

void RouterServer::Wait() {
  if (server_ != nullptr) server_->Wait();
  if (worker_server_ != nullptr) worker_server_->Wait();
}

}  // namespace superserve
