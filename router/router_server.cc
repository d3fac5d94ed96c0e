#include "router/router_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/model_repository.h"
#include "router/admin_service.h"
#include "router/inference_service.h"
#include "router/open_inference_service.h"
#include "router/router_metrics.h"
#include "router/worker_link_service.h"

namespace superserve {

RouterServer::RouterServer(RouterServerOptions options) : options_(std::move(options)) {}

RouterServer::~RouterServer() { Shutdown(); }

absl::Status RouterServer::Start() {
  // Debian's Abseil checks lock-order cycles on every Mutex::Lock (a debug
  // aid); on the query path that cost ~3-9% of the router's CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  metrics_ = std::make_unique<RouterMetrics>();
  dispatcher_ = std::make_unique<Dispatcher>(options_.dispatcher, RealClock::Get(), metrics_.get());
  // Autoscaling advice at the objective of queries without a deadline.
  RouterMetrics::WorkersNeededOptions advice;
  advice.objective = options_.default_slo;
  metrics_->EnableWorkersNeeded(advice, RealClock::Get());
  if (!options_.model_repo.empty()) {
    auto models = LoadModelRepository(options_.model_repo);
    if (!models.ok()) return models.status();
    if (models->empty()) {
      return absl::NotFoundError(
          absl::StrCat("model repository ", options_.model_repo, " has no <model>/profile.json"));
    }
    for (const auto& m : *models) {
      if (auto s = dispatcher_->AddModel(m.profile); !s.ok()) return s;
      metrics_->SetModelProfile(m.profile);
    }
  }
  inference_ = std::make_unique<InferenceService>(dispatcher_.get(), options_.default_slo);
  open_inference_ = std::make_unique<OpenInferenceService>(dispatcher_.get(), options_.default_slo);
  worker_link_ = std::make_unique<WorkerLinkService>(dispatcher_.get());
  admin_ = std::make_unique<AdminService>(dispatcher_.get(), options_.admin_token,
                                          options_.model_repo);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(inference_.get());
  builder.RegisterService(open_inference_.get());
  builder.RegisterService(worker_link_.get());
  builder.RegisterService(admin_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen));
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
  server_->GetHealthCheckService()->SetServingStatus(false);
  open_inference_->SetServing(false);
  dispatcher_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void RouterServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace superserve
