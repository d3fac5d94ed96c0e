#include "router/admin_service.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model_digest.h"
#include "common/model_repository.h"
#include "common/secret.h"
#include "router/inference_service.h"

namespace superserve {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const grpc::Status& s) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(s);
  return reactor;
}

}  // namespace

grpc::Status AdminService::Authorize(grpc::CallbackServerContext* context) const {
  if (token_.empty()) {
    // No token can be right: "bad admin token" sent operators hunting for
    // the right one. UNIMPLEMENTED is gRPC's "not enabled in this service".
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "the Admin service is off: this router was started without an admin "
                        "token (start it with --admin_token_file to turn it on)");
  }
  const auto& md = context->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing authorization metadata");
  }
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(value, kBearer) ||
      !SameSecret(value.substr(kBearer.size()), token_)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "bad admin token");
  }
  return grpc::Status::OK;
}

AdminService::~AdminService() {
  std::vector<Aside> threads;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.thread.join();
}

void AdminService::JoinFinishedLocked() {
  // A finished thread has only its return left: the join does not wait.
  auto finished = std::partition(threads_.begin(), threads_.end(),
                                 [](const Aside& a) { return !a.done->load(); });
  for (auto it = finished; it != threads_.end(); ++it) it->thread.join();
  threads_.erase(finished, threads_.end());
}

size_t AdminService::threads_held() {
  std::lock_guard<std::mutex> lock(threads_mu_);
  JoinFinishedLocked();
  return threads_.size();
}

void AdminService::RunAside(std::function<void()> wait) {
  std::lock_guard<std::mutex> lock(threads_mu_);
  JoinFinishedLocked();
  auto done = std::make_shared<std::atomic<bool>>(false);
  threads_.push_back({std::thread([wait = std::move(wait), done] {
                        wait();
                        done->store(true);
                      }),
                      done});
}

grpc::ServerUnaryReactor* AdminService::RegisterModel(grpc::CallbackServerContext* context,
                                                      const v1::RegisterModelRequest* request,
                                                      v1::RegisterModelResponse* response) {
  if (auto s = Authorize(context); !s.ok()) return Done(context, s);
  std::filesystem::path dir(request->path().empty() ? request->name() : request->path());
  if (dir.is_relative()) dir = std::filesystem::path(model_repo_) / dir;
  const Nanos timeout = Millis(request->timeout_ms() > 0 ? request->timeout_ms() : 60000);
  auto* reactor = context->DefaultReactor();
  RunAside([this, reactor, response, dir = dir.string(), name = request->name(), timeout] {
    HotModels::Outcome out = dispatcher_->lifecycle().Register(dir, name, timeout);
    for (const auto& w : out.workers) {
      auto* r = response->add_workers();
      r->set_worker(w.worker);
      r->set_ready(w.ready);
      r->set_error(w.error);
      r->set_load_ms(w.load_us / 1000);
    }
    response->set_visible(out.visible);
    response->set_name(out.model);
    for (const auto& info : dispatcher_->ListModels()) {
      if (out.visible && info.name() == out.model) *response->mutable_model() = info;
    }
    reactor->Finish(ToGrpcStatus(out.status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::UnregisterModel(grpc::CallbackServerContext* context,
                                                        const v1::UnregisterModelRequest* request,
                                                        v1::UnregisterModelResponse* response) {
  if (auto s = Authorize(context); !s.ok()) return Done(context, s);
  const Nanos timeout =
      Millis(request->drain_timeout_ms() > 0 ? request->drain_timeout_ms() : 30000);
  auto* reactor = context->DefaultReactor();
  RunAside([this, reactor, name = request->name(), version = request->version(), timeout] {
    reactor->Finish(
        ToGrpcStatus(dispatcher_->lifecycle().Unregister(name, version, timeout)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::ListModels(grpc::CallbackServerContext* context,
                                                   const v1::ListModelsRequest* request,
                                                   v1::ListModelsResponse* response) {
  if (auto s = Authorize(context); !s.ok()) return Done(context, s);
  for (auto& info : dispatcher_->ListModels()) *response->add_models() = std::move(info);
  return Done(context, grpc::Status::OK);
}

}  // namespace superserve
