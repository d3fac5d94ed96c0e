#include "router/admin_service.h"

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
  const auto& md = context->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing authorization metadata");
  }
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (token_.empty() || !absl::StartsWith(value, kBearer) ||
      !SameSecret(value.substr(kBearer.size()), token_)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "bad admin token");
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* AdminService::RegisterModel(grpc::CallbackServerContext* context,
                                                      const v1::RegisterModelRequest* request,
                                                      v1::RegisterModelResponse* response) {
  if (auto s = Authorize(context); !s.ok()) return Done(context, s);
  std::filesystem::path dir(request->path().empty() ? request->name() : request->path());
  if (dir.is_relative()) dir = std::filesystem::path(model_repo_) / dir;
  auto entry = LoadModelDirectory(dir.string());
  if (!entry.ok()) return Done(context, ToGrpcStatus(entry.status()));
  if (!request->name().empty() && request->name() != entry->name) {
    return Done(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                      absl::StrCat("name \"", request->name(),
                                                   "\" differs from the profile's model \"",
                                                   entry->name, "\"")));
  }
  auto digest = DigestModelDirectory(entry->directory);
  if (!digest.ok()) return Done(context, ToGrpcStatus(digest.status()));
  if (auto s = dispatcher_->AddModel(entry->profile, &*digest); !s.ok()) {
    return Done(context, ToGrpcStatus(s));
  }
  for (const auto& info : dispatcher_->ListModels()) {
    if (info.name() == entry->name) *response->mutable_model() = info;
  }
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::UnregisterModel(grpc::CallbackServerContext* context,
                                                        const v1::UnregisterModelRequest* request,
                                                        v1::UnregisterModelResponse* response) {
  if (auto s = Authorize(context); !s.ok()) return Done(context, s);
  return Done(context, ToGrpcStatus(dispatcher_->RemoveModel(request->name())));
}

grpc::ServerUnaryReactor* AdminService::ListModels(grpc::CallbackServerContext* context,
                                                   const v1::ListModelsRequest* request,
                                                   v1::ListModelsResponse* response) {
  if (auto s = Authorize(context); !s.ok()) return Done(context, s);
  for (auto& info : dispatcher_->ListModels()) *response->add_models() = std::move(info);
  return Done(context, grpc::Status::OK);
}

}  // namespace superserve
